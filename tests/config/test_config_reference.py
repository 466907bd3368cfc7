"""docs/configuration.md and docs/config.example.yaml against the typed configuration.

The reference is generated from the dataclasses the loader validates against, so regenerating it
must give the committed copy; the example claims to show every key, so every key the loader accepts
must appear in it (commented-out keys count once uncommented, and the uncommented file must load).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from adapter import config
from adapter.config.reference import all_keys, render

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_reference_is_generated_from_the_code() -> None:
    """`python -m adapter.config.reference > docs/configuration.md` gives the committed file."""
    assert (DOCS / "configuration.md").read_text(encoding="utf-8") == render(), (
        "docs/configuration.md is out of date: run `make generate`"
    )


def test_every_key_has_a_meaning() -> None:
    """A key without a docstring would be a row nobody can act on."""
    empty = [line for line in render().splitlines() if line.startswith("| `") and line.endswith("|  |")]
    assert empty == []


def _uncommented() -> str:
    """The example with its commented-out keys (`# key: value`) switched on."""
    text = (DOCS / "config.example.yaml").read_text(encoding="utf-8")
    return re.sub(r"(?m)^(\s*)# ([a-z_]+:)", r"\1\2", text)


def _paths(node: Any, prefix: str = "") -> set[str]:
    found: set[str] = set()
    if not isinstance(node, dict):
        return found
    for key, value in node.items():
        path = f"{prefix}{key}"
        if prefix == "metrics.":
            found |= {f"metrics.<name>.{inner}" for inner in value}
            continue
        children = _paths(value, f"{path}.")
        found |= children or {path}
        if key in ("headers",):
            found.add(path)
    return found


def test_example_holds_every_key() -> None:
    """Every key of docs/configuration.md appears in docs/config.example.yaml."""
    present = _paths(yaml.safe_load(_uncommented()))
    missing = sorted(set(all_keys()) - present)
    assert missing == [], f"docs/config.example.yaml lacks {missing}"


def test_example_loads_as_it_is_and_uncommented() -> None:
    """The example is a valid configuration, and so is every commented-out alternative in it."""
    config.load((DOCS / "config.example.yaml").read_text(encoding="utf-8"))
    config.load(_uncommented())
