"""README.md and helm/README.md install the chart the same way (release name and namespace).

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
    found = _installs(REPO / "README.md") | _installs(REPO / "helm" / "README.md")
    assert found == {("vllm-autoscale", "llm")}
