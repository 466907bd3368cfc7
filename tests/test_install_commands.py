"""README.md, helm/README.md and the docs/ pages install the chart the same way (release name and
namespace).

A newcomer who follows one page and then the other must not end up with two releases.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _installs(path: Path) -> set[tuple[str, str]]:
    text = path.read_text(encoding="utf-8")
    return set(re.findall(r"helm install (\S+) \./helm -n (\S+)", text))


def test_one_release_name_and_namespace() -> None:
    pages = [REPO / "README.md", REPO / "helm" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    found = set().union(*(_installs(page) for page in pages))
    assert found == {("vllm-autoscale", "llm")}
