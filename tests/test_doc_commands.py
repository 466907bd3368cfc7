"""Every `vllm-autoscale` command that README.md or a docs/ page shows in a shell block parses.

A flag renamed or dropped would otherwise leave a page telling a reader to type something the
program refuses. The commands that the walkthrough, the profile page and the policy page run or
compare are held further by their own tests (tests/integration/test_readme_walkthrough.py,
tests/lab/profile/test_readme.py, tests/integration/test_readme_targets.py); this one covers the
rest.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from adapter.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: shell words that end a command: what follows is another command or a redirection
_ENDS = {"&", "&&", "|", "||", ";"}


def _shell_blocks(text: str) -> list[str]:
    return re.findall(r"^```(?:sh|bash|shell)\n(.*?)^```", text, flags=re.S | re.M)


def commands(text: str) -> list[list[str]]:
    """The argv of each `vllm-autoscale` command in the text's shell blocks (continuations joined,
    comments, redirections and what follows `&`, `|` or `;` dropped); one shown with `...` for
    "the rest as above" is not a whole command and is left out."""
    found = []
    for block in _shell_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            if not line.startswith("vllm-autoscale ") or " ..." in line:
                continue
            argv = []
            for word in shlex.split(line, comments=True):
                if word in _ENDS:
                    break
                if re.match(r"^\d*>", word):
                    continue
                argv.append(word)
            found.append(argv[1:])
    return found


def _shown() -> list[tuple[str, list[str]]]:
    return [
        (f"{page.relative_to(REPO).as_posix()}: {' '.join(argv)}", argv)
        for page in PAGES
        for argv in commands(page.read_text(encoding="utf-8"))
    ]


def test_the_pages_show_commands() -> None:
    """The README shows the local run's and a cluster's commands; an emptied page cannot pass below."""
    shown = {argv[0] for _, argv in _shown()}
    assert {"serve", "query", "emulate", "profile", "backtest", "demo"} <= shown


def test_commands_split_as_a_shell_would() -> None:
    text = (
        "```sh\nvllm-autoscale emulate --replicas 2 >emulate.log 2>&1 &\nvllm-autoscale serve \\\n    "
        "--port 1  # c\n```\n"
    )
    assert commands(text) == [["emulate", "--replicas", "2"], ["serve", "--port", "1"]]


@pytest.mark.parametrize(("shown", "argv"), _shown(), ids=[shown for shown, _ in _shown()])
def test_every_shown_command_parses(shown: str, argv: list[str]) -> None:
    args = build_parser(argv[0]).parse_args(argv)
    assert args.command == argv[0], shown
