"""What the lab's commands share about flags beyond their values (`lab.units`): a renamed flag's old
spelling, kept so that scripts written against it still run.

A flag name has one meaning across the lab's commands (docs/lab.md lists the renames); where an old
name was renamed and a user could have scripted it, it stays as a hidden alias that says so on
stderr, once for each use, and means exactly what the new name means.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any


class _Renamed(argparse.Action):
    """Stores into the new flag's `dest`, after a one-line notice naming the new flag."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog}: {option_string} is deprecated: use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def renamed(
    group: argparse._ActionsContainer, old: str, new: str, dest: str, kind: Callable[[str], Any]
) -> None:
    """`old` as a deprecated alias of the flag `new` (whose `dest` and `kind` it shares); hidden from
    `--help`, so the help shows one name for one meaning."""
    # No default of its own (SUPPRESS): the new flag's default stands unless the old name is given.
    group.add_argument(
        old, dest=dest, type=kind, action=_Renamed, new=new, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
