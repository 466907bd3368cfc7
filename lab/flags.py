"""What the lab's commands share about flags beyond their values (`lab.units`): the latency objective's
pair of flags, and a renamed flag's old spelling, kept so that scripts written against it still run.

A flag name has one meaning across the lab's commands (docs/lab.md lists the renames); where an old
name was renamed and a user could have scripted it, it stays as a hidden alias that says so on
stderr, once for each use, and means exactly what the new name means.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from lab.slo import Slo
from lab.units import duration


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


def slo_flags(group: argparse._ActionsContainer, *, from_profile: bool = False) -> None:
    """`--slo-ttft` and `--slo-tpot`, durations with one spelling everywhere; their defaults are the
    project's objective (500ms, 50ms), or `None` where a profile's objective stands in."""
    for flag, default, what in (("--slo-ttft", Slo.ttft, "TTFT"), ("--slo-tpot", Slo.tpot, "TPOT")):
        told = "default: the profile's" if from_profile else f"default {default * 1000:g}ms"
        group.add_argument(
            flag,
            type=duration,
            default=None if from_profile else default,
            metavar="DURATION",
            help=f"{what} objective ({told})",
        )
