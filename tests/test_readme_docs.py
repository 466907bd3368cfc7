"""README.md is read in ten minutes, and docs/ is reached from it.

The README holds what a newcomer needs first (what it is, the two commands, the local run, a cluster,
where to go next) and links each page of docs/ for the rest. These tests keep it that way: the README
stays short, no page of docs/ is left unlinked, each page says what it is for and links back, and no
relative link in the README or under docs/ points at a file or a heading that is not there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_README_LINES = 300

_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~)")


def _pages() -> list[Path]:
    """Every Markdown page this suite holds to its links: the README and all of docs/."""
    return [README, *sorted((REPO / "docs").rglob("*.md"))]


def _unfenced(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    kept, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return kept


def _links(page: Path) -> list[str]:
    """The link targets of a page's prose (a link shown as code, fenced or inline, is not a link)."""
    prose = "\n".join(re.sub(r"`[^`]*`", "", line) for line in _unfenced(page.read_text(encoding="utf-8")))
    return _LINK.findall(prose)


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("//")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without markup, lower case, punctuation dropped
    (letters, digits, `_`, `-` and spaces stay), each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[`*]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors a Markdown page defines: one per heading (repeats get -1, -2, ...) and any
    `<a id>`/`<a name>`."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = page.read_text(encoding="utf-8")
    for line in _unfenced(text):
        if heading := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line):
            base = slug(heading.group(1))
            found.add(base if base not in seen else f"{base}-{seen[base]}")
            seen[base] = seen.get(base, 0) + 1
    found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return found


def test_slug_is_githubs() -> None:
    """Anchors the pages already use, as GitHub renders them."""
    assert slug("Profile on a real vLLM 0.26.0: knees against a long-step sweep") == (
        "profile-on-a-real-vllm-0260-knees-against-a-long-step-sweep"
    )
    assert slug("With KEDA (`autoscaler: keda`)") == "with-keda-autoscaler-keda"
    assert (
        slug("`vllm_saturation`: one number, 1.0 at the knee") == "vllm_saturation-one-number-10-at-the-knee"
    )


def test_the_readme_is_read_in_ten_minutes() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move a topic into docs/"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {
        (README.parent / target.split("#")[0]).resolve().relative_to(REPO).as_posix()
        for target in _links(README)
        if _relative(target) and not target.startswith("#")
    }
    pages = {p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md")}
    assert sorted(pages - linked) == []


@pytest.mark.parametrize("page", sorted((REPO / "docs").glob("*.md")), ids=lambda p: p.name)
def test_each_page_stands_on_its_own(page: Path) -> None:
    """A title, a first paragraph that says what the page is for, and a link back to the README."""
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# "), "a title on the first line"
    first = next(block for block in text.split("\n\n")[1:] if not block.lstrip().startswith("<!--"))
    assert not first.lstrip().startswith(("#", "|", "```", "-")), "a paragraph after the title"
    assert "../README.md" in _links(page), "a link back to the README"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    """Each relative link names an existing file, and a `#anchor` into a Markdown page names one of
    its headings."""
    broken = []
    for target in _links(page):
        if not _relative(target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        name = file.relative_to(REPO).as_posix() if file.is_relative_to(REPO) else str(file)
        if not file.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no such heading in {name}")
    assert broken == []
