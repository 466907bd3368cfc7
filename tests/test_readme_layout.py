"""docs/layout.md's Layout section against the tree: every room it names exists, every room that exists is
named.

The section (moved from the README, which links it) is a newcomer's map; a module added or moved without it
would send them to the wrong place, and a named module that is gone would send them nowhere.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _lines() -> list[str]:
    """The lines of the Layout section's block, one room each."""
    text = (REPO / "docs" / "layout.md").read_text(encoding="utf-8")
    section = text[text.index("## Layout") :]
    block = section[section.index("```") + 3 :]
    block = block[block.index("\n") + 1 : block.index("```")]
    return [line for line in block.splitlines() if line.strip()]


def _named() -> list[str]:
    return [line.split()[0] for line in _lines()]


def test_every_named_room_exists() -> None:
    missing = [path for path in _named() if not (REPO / path).exists()]
    assert missing == []


def test_every_room_is_named() -> None:
    """Each package of the server and the lab, and each top-level server module, has its line."""
    named = set(_named())
    rooms = [f"{p.parent.relative_to(REPO).as_posix()}/" for p in (REPO / "adapter").glob("*/**/__init__.py")]
    rooms += [f"{p.parent.relative_to(REPO).as_posix()}/" for p in (REPO / "lab").glob("*/__init__.py")]
    rooms += [
        p.relative_to(REPO).as_posix()
        for p in [*(REPO / "adapter").glob("*.py"), *(REPO / "lab").glob("*.py")]
        if not re.match(r"__(init|main)__\.py$", p.name)
    ]
    unnamed = sorted(set(rooms) - named)
    assert unnamed == [], f"docs/layout.md's Layout section does not name {unnamed}"


def _described() -> dict[str, str]:
    """Each named room and what its line says of it."""
    return {line.split()[0]: line.split(maxsplit=1)[1] if len(line.split()) > 1 else "" for line in _lines()}


def _modules(package: Path) -> list[str]:
    return sorted(p.stem for p in package.glob("*.py") if not p.name.startswith("__"))


def _unnamed(text: str, modules: list[str]) -> list[str]:
    """The modules `text` does not name (a module is named by its file's stem, as a word)."""
    return [m for m in modules if not re.search(rf"(?<![\w/.]){re.escape(m)}(?![\w])", text)]


def test_every_room_says_what_it_holds() -> None:
    """No line is a bare path: each says what the room does."""
    assert [room for room, text in _described().items() if not text.strip()] == []


def test_a_server_packages_line_names_each_of_its_modules() -> None:
    """`adapter/sources/` says which module is the scrape loop and which parses pages: a reader finds
    the file from docs/layout.md, and a module added without a word there fails here."""
    described = _described()
    unnamed = {
        f"{package.parent.relative_to(REPO).as_posix()}/": missing
        for package in (REPO / "adapter").glob("*/**/__init__.py")
        if (
            missing := _unnamed(
                described.get(f"{package.parent.relative_to(REPO).as_posix()}/", ""), _modules(package.parent)
            )
        )
    }
    assert unnamed == {}, f"docs/layout.md's Layout lines do not name these modules: {unnamed}"


def test_a_lab_packages_docstring_names_each_of_its_modules() -> None:
    """The lab's packages are larger; docs/layout.md names the package, and its docstring maps the modules."""
    unnamed = {
        f"{package.parent.relative_to(REPO).as_posix()}/": missing
        for package in (REPO / "lab").glob("*/__init__.py")
        if (
            missing := _unnamed(
                ast.get_docstring(ast.parse(package.read_text(encoding="utf-8"))) or "",
                _modules(package.parent),
            )
        )
    }
    assert unnamed == {}, f"these lab packages' docstrings do not name these modules: {unnamed}"
