"""README's Layout section against the tree: every room it names exists, every room that exists is named.

The section is a newcomer's map; a module added or moved without it would send them to the wrong
place, and a named module that is gone would send them nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _named() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Layout") :]
    block = section[section.index("```") + 3 :]
    block = block[block.index("\n") + 1 : block.index("```")]
    return [line.split()[0] for line in block.splitlines() if line.strip()]


def test_every_named_room_exists() -> None:
    missing = [path for path in _named() if not (REPO / path).exists()]
    assert missing == []


def test_every_room_is_named() -> None:
    """Each package of the server and the lab, and each top-level server module, has its line."""
    named = set(_named())
    rooms = [f"{p.parent.relative_to(REPO).as_posix()}/" for p in (REPO / "adapter").glob("*/__init__.py")]
    rooms += [f"{p.parent.relative_to(REPO).as_posix()}/" for p in (REPO / "lab").glob("*/__init__.py")]
    rooms += [
        p.relative_to(REPO).as_posix()
        for p in [*(REPO / "adapter").glob("*.py"), *(REPO / "lab").glob("*.py")]
        if not re.match(r"__(init|main)__\.py$", p.name)
    ]
    unnamed = sorted(set(rooms) - named)
    assert unnamed == [], f"README's Layout section does not name {unnamed}"
