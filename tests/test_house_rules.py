"""The size rules of the product's code, held against the tree (issue 39's done-when).

A folder of more than 15 modules is several concepts sharing a room, and a module past 350 lines was,
in this project's history, met by packing lines: both are checked here so that the next module added
to a full folder, or the next function added to a full module, is a decision made in review (a new
room, a split) rather than drift. The formatter (`ruff format --check`) and the line-length rule
(`ruff check`, E501 at 110) run in `make lint`; a formatter comment that skips a line or turns the
formatter off would hide code from both, so none is allowed (`HIDDEN`).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("adapter", "lab", "dashboards", "alerts")
MAX_MODULES = 15
"""Modules a folder holds besides its package's `__init__.py` (the package itself, not a room in it)."""
MAX_LINES = 350
HIDDEN = re.compile(r"#\s*fmt:\s*(skip|off)\b")
"""The comments ruff's formatter obeys to leave code as it is (`fmt:skip` too)."""


def _modules() -> list[Path]:
    return sorted(path for root in PRODUCT for path in (REPO / root).rglob("*.py"))


def test_the_tree_has_product_modules() -> None:
    """The rules below would pass on an empty list: the walk finds the server, the lab and the artifacts."""
    folders = {path.relative_to(REPO).parts[0] for path in _modules()}
    assert folders == set(PRODUCT)


def test_no_folder_holds_more_than_fifteen_modules() -> None:
    counts: dict[str, int] = {}
    for path in _modules():
        if path.name != "__init__.py":
            folder = path.parent.relative_to(REPO).as_posix()
            counts[folder] = counts.get(folder, 0) + 1
    crowded = {folder: n for folder, n in counts.items() if n > MAX_MODULES}
    assert crowded == {}, f"folders over {MAX_MODULES} modules (split them into rooms): {crowded}"


def test_no_module_is_over_350_lines() -> None:
    long = {}
    for path in _modules():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            long[path.relative_to(REPO).as_posix()] = lines
    assert long == {}, f"modules over {MAX_LINES} lines: {long}"


def test_no_line_is_hidden_from_the_formatter() -> None:
    roots = (*PRODUCT, "tests", "bench", "scripts")
    hidden = [
        path.relative_to(REPO).as_posix()
        for root in roots
        for path in (REPO / root).rglob("*.py")
        if HIDDEN.search(path.read_text(encoding="utf-8"))
    ]
    assert hidden == []
