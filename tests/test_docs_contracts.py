"""The docs as contracts: every file, command, flag and make target a page names exists.

A page that tells a reader to open `lab/backtest/band.py`, run `bash scripts/gpu/day.sh start` or type
`vllm-autoscale rehearse --max-replicas 2` is a promise; a file moved or a flag renamed breaks it
silently. These checks read README.md, every page under docs/ and the runs' index, and fail naming
the page, the line and what is missing:

1. each relative Markdown link names an existing file (tests/test_readme_docs.py checks the anchors),
   and each code span that is a path of this repository (its first part one of the tree's rooms)
   names an existing file or folder, as does each script a shell block runs (`bash PATH`,
   `python PATH`);
2. each `vllm-autoscale COMMAND` (or `python -m adapter COMMAND`) in a code span or a shell block
   names a real sub-command and only options that sub-command's parser has, and a code span that
   starts with a sub-command and an option (`profile --pd`) the same; each `make TARGET` names a
   target of the Makefile;
3. each page of docs/ is at most `MAX_PAGE_LINES` lines.

Tests do not start a process: the parsers are the CLI's own (`adapter.cli.build_parser`).
"""

from __future__ import annotations

import argparse
import itertools
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from adapter.cli import LAB_COMMANDS, _sub_command, build_parser

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
#: The pages held to these contracts: the README, every page of docs/, and the index of the runs.
PAGES = [REPO / "README.md", *sorted(DOCS.rglob("*.md")), REPO / "runs" / "README.md"]
#: A page of docs/ is read in one sitting and holds one topic (issue 39: "each page under about 300
#: lines"); a longer one is a run log (its records belong under runs/) or two topics.
MAX_PAGE_LINES = 300
#: The first part of a path the docs may name in this repository: a code span starting with one of
#: these is a path and must exist. Anything else (`profile.json`, `.real-vllm/`, a host's
#: `/tmp/...`) is not this repository's.
ROOMS = frozenset(
    {"adapter", "lab", "tests", "bench", "scripts", "docs", "runs", "traces", "examples", "helm"}
    | {"alerts", "dashboards", ".ci"}
)
ROOT_FILES = frozenset({"README.md", "Makefile", "Dockerfile", "pyproject.toml"})
#: Words that end a command in a shell line: what follows is another command.
_ENDS = frozenset({"&", "&&", "|", "||", ";", ")", "do", "done", "then"})
#: Interpreters whose first argument that is not an option is a script to run.
_RUNNERS = frozenset({"bash", "sh", "python", "python3", ".venv/bin/python"})
#: Placeholders a path may hold: a path with one of these names a family, not a file.
_PLACEHOLDER = re.compile(r"\.\.\.|[<>{}$]|\bNAME\b|\bDIR\b|\bFILE\b|\bS\b")
#: The program at the start of a shell command (after `(`, a quote, `;`, `&&`, `|`, an environment
#: assignment or `nohup`/`setsid`/`timeout N`): `helm install vllm-autoscale ./helm` is not one.
_COMMAND = re.compile(
    r"(?:^\s*|[(`\"']|[;&|]\s*|\b(?:nohup|setsid|exec|time|timeout \d+[smh]?|\w+=\S*)\s+)"
    r"(?:vllm-autoscale|python3? -m adapter)\s+(?=\S)"
)
_MAKE = re.compile(r"(?:^|[\s(`;&])make\s+([^\s#;&|)`]+)")
_FENCE = re.compile(r"^\s*(```|~~~)(\w*)")
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


@dataclass(frozen=True)
class Page:
    """A page's text, its name in messages and the folder its links are relative to."""

    name: str
    folder: Path
    text: str

    @classmethod
    def of(cls, path: Path) -> Page:
        return cls(path.relative_to(REPO).as_posix(), path.parent, path.read_text(encoding="utf-8"))


def _chunks(page: Page) -> Iterator[tuple[int, str, str]]:
    """(first line, kind, text) of each prose paragraph (`prose`), shell block (`shell`) and other
    fenced block (`block`); indented blocks of four spaces are shell blocks, as the pages use them."""
    lines = page.text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence := _FENCE.match(line):
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(fence.group(1))),
                len(lines),
            )
            kind = "shell" if fence.group(2) in ("sh", "bash", "shell", "console") else "block"
            yield i + 2, kind, "\n".join(lines[i + 1 : end])
            i = end + 1
        elif line.startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            end = i
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            yield i + 1, "shell", "\n".join(text[4:] for text in lines[i:end])
            i = end
        elif line.strip():
            end = i
            while end < len(lines) and lines[end].strip() and not _FENCE.match(lines[end]):
                end += 1
            yield i + 1, "prose", "\n".join(lines[i:end])
            i = end
        else:
            i += 1


def _spans(page: Page) -> Iterator[tuple[int, str]]:
    """(line, text) of each code span in the page's prose (one may run over a line break)."""
    for first, kind, text in _chunks(page):
        if kind == "prose":
            for span in _SPAN.finditer(text):
                yield first + text[: span.start()].count("\n"), " ".join(span.group(2).split())


def _shell_lines(page: Page) -> Iterator[tuple[int, str]]:
    """(line, text) of each line of the page's shell blocks, continuation lines joined."""
    for first, kind, text in _chunks(page):
        if kind != "shell":
            continue
        number, pending, start = first, "", first
        for line in text.splitlines():
            if not pending:
                start = number
            line = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]  # a comment is prose
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
            else:
                yield start, pending + line
                pending = ""
            number += 1
        if pending:
            yield start, pending


def _words(text: str) -> list[str] | None:
    """The shell words of `text` up to the end of its command; `None` when it does not split
    (a quote left open in a shortened example)."""
    try:
        split = shlex.split(text, comments=True)
    except ValueError:
        return None
    words = []
    for word in split:
        if word in _ENDS or word.endswith(";"):
            break
        if re.match(r"^\d*[<>]", word):
            continue
        words.append(word)
    return words


# ---- paths -------------------------------------------------------------------------------------


def _as_repo_path(text: str) -> str | None:
    """`text` as a path of this repository, or `None` when it is not one (or names a family of files)."""
    text = text.strip().strip("\"'").rstrip(".,:;")
    text = re.sub(r"::.*$|:\d+(-\d+)?$", "", text)  # a test id, or a line of a file
    if " " in text or not text or _PLACEHOLDER.search(text):
        return None
    first = text.split("/", 1)[0]
    if text in ROOT_FILES or (first in ROOMS and "/" in text):
        return text
    return None


def _exists(path: str) -> bool:
    if "*" in path or "?" in path:
        return any(REPO.glob(path))
    return (REPO / path).exists()


def _missing_paths(page: Page) -> list[str]:
    found = []
    for line, span in _spans(page):
        if (path := _as_repo_path(span)) and not _exists(path):
            found.append(f"{page.name}:{line}: `{span}` names {path}, which is not in the repository")
    for line, text in _shell_lines(page):
        words = _words(text) or []
        for runner, script in itertools.pairwise(words):
            if runner in _RUNNERS and (path := _as_repo_path(script)) and not _exists(path):
                found.append(
                    f"{page.name}:{line}: `{runner} {script}` runs {path}, which is not in the repository"
                )
    for first, kind, text in _chunks(page):
        if kind != "prose":
            continue
        prose = _SPAN.sub("", text)
        for link in _LINK.finditer(prose):
            target = link.group(1).split("#", 1)[0]
            if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                continue
            if not (page.folder / target).resolve().exists():
                line = first + prose[: link.start()].count("\n")
                found.append(f"{page.name}:{line}: the link ({link.group(1)}) names no file")
    return found


# ---- commands ----------------------------------------------------------------------------------


@cache
def _parser(command: str | None) -> argparse.ArgumentParser:
    """The parser of sub-command `command` (the top-level parser for `None`), with its options."""
    top = build_parser(command)
    return top if command is None else _sub_command(top, command)


def _subcommands() -> frozenset[str]:
    return frozenset({"serve", "query", *LAB_COMMANDS})


def _options(parser: argparse.ArgumentParser) -> frozenset[str]:
    return frozenset(option for action in parser._actions for option in action.option_strings)


def _check_command(words: list[str]) -> str | None:
    """What is wrong with `vllm-autoscale WORDS...`, or `None`."""
    if not words:
        return None
    if words[0].startswith("-"):
        bad = [w for w in words if w.startswith("-") and w.split("=")[0] not in _options(_parser(None))]
        return f"no option {bad[0]} before the sub-command" if bad else None
    if words[0] not in _subcommands():
        return f"no sub-command {words[0]!r} (there are {', '.join(sorted(_subcommands()))})"
    known = _options(_parser(words[0]))
    for word in words[1:]:
        if word == "--":
            break
        option = word.split("=", 1)[0]
        if word.startswith("-") and not re.match(r"^-\d", word) and word != "-" and option not in known:
            return f"`{words[0]}` has no option {option}"
    return None


def _commands(page: Page) -> Iterator[tuple[int, str, list[str]]]:
    """(line, text, words after the program) of each command the page shows."""
    sources = [*_spans(page), *_shell_lines(page)]
    for line, text in sources:
        for found in _COMMAND.finditer(text):
            words = _words(text[found.end() :])
            if words is not None:
                yield line, text.strip(), words
    for line, span in _spans(page):  # `profile --pd`: a sub-command and its option, in prose
        words = span.split()
        if len(words) > 1 and words[0] in _subcommands() and words[1].startswith("-"):
            parsed = _words(span)
            if parsed is not None:
                yield line, span, parsed


@cache
def _make_targets() -> frozenset[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    targets: set[str] = set()
    for line in text.splitlines():
        if (rule := re.match(r"^([\w.-]+(?:\s+[\w.-]+)*)\s*:(?!=)", line)) and not line.startswith("\t"):
            targets.update(rule.group(1).split())
    return frozenset(targets)


def _broken_commands(page: Page) -> list[str]:
    found = []
    for line, text, words in _commands(page):
        if problem := _check_command(words):
            found.append(f"{page.name}:{line}: {problem}, in `{text}`")
    for line, text in [*_spans(page), *_shell_lines(page)]:
        for make in _MAKE.finditer(text):
            target = make.group(1)
            if target.startswith("-") or "=" in target or target in _make_targets():
                continue
            found.append(f"{page.name}:{line}: the Makefile has no target {target!r}, in `{text.strip()}`")
    return found


# ---- the tests ---------------------------------------------------------------------------------


def _ids(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@pytest.mark.parametrize("path", PAGES, ids=_ids)
def test_every_file_the_page_names_exists(path: Path) -> None:
    missing = _missing_paths(Page.of(path))
    assert missing == [], "\n".join(missing)


@pytest.mark.parametrize("path", PAGES, ids=_ids)
def test_every_command_the_page_shows_exists(path: Path) -> None:
    broken = _broken_commands(Page.of(path))
    assert broken == [], "\n".join(broken)


@pytest.mark.parametrize("path", sorted(DOCS.rglob("*.md")), ids=_ids)
def test_each_page_is_read_in_one_sitting(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_PAGE_LINES, (
        f"{_ids(path)} has {lines} lines, over {MAX_PAGE_LINES}: split it by topic, or move its run "
        "records to runs/"
    )


BROKEN = """# Broken

Open `lab/no_such_module.py` or [this](no-such-page.md); `lab/backtest/` and [that](lab.md) are there.

```sh
vllm-autoscale rehearse --max-replicas 2 --no-such-flag
vllm-autoscale no-such-command --x
vllm-autoscale demo --metric vllm_requests_inflight --target 12 >demo.log 2>&1 &
bash scripts/gpu/no-such.sh start
make no-such-target
make test
```

A span: `profile --no-such-option`.
"""


def test_the_checks_find_what_is_broken() -> None:
    """Each check fails on a page made to break it, naming the line: these tests cannot pass by
    reading nothing."""
    page = Page("docs/broken.md", DOCS, BROKEN)
    assert _missing_paths(page) == [
        "docs/broken.md:3: `lab/no_such_module.py` names "
        "lab/no_such_module.py, which is not in the repository",
        "docs/broken.md:9: `bash scripts/gpu/no-such.sh` runs scripts/gpu/no-such.sh, which is not in the "
        "repository",
        "docs/broken.md:3: the link (no-such-page.md) names no file",
    ]
    commands = ", ".join(sorted(_subcommands()))
    assert sorted(_broken_commands(page)) == sorted(
        [
            "docs/broken.md:6: `rehearse` has no option --no-such-flag, in "
            "`vllm-autoscale rehearse --max-replicas 2 --no-such-flag`",
            f"docs/broken.md:7: no sub-command 'no-such-command' (there are {commands}), in "
            "`vllm-autoscale no-such-command --x`",
            "docs/broken.md:10: the Makefile has no target 'no-such-target', in `make no-such-target`",
            "docs/broken.md:14: `profile` has no option --no-such-option, in `profile --no-such-option`",
        ]
    )
