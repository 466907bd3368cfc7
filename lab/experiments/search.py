"""A boundary found by bisection: the highest value that held and the lowest that failed.

The knee (a rate), the long-context boundary in prompt length at a fixed rate, and the one in rate at
a fixed long prompt are each a point on a monotone axis below which the SLO holds and above which it
fails; a few probes halve the range in turn. The answer is a band, never a point: the boundary lies
in [`held`, `failed`), and an end the search never measured says so (`held_measured`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


def significant(value: float) -> str:
    """Three significant figures without an exponent: `2,830`, `19.3`, `0.0513`."""
    rounded = float(f"{value:.3g}")
    return f"{rounded:,.0f}" if abs(rounded) >= 1000 else f"{rounded:g}"


@dataclass(frozen=True)
class Band:
    """Where the boundary lies: [`held`, `failed`), each end measured or the range's own end."""

    held: float
    failed: float
    held_measured: bool
    failed_measured: bool
    probes: tuple[tuple[float, bool], ...] = field(default=())
    """(value, held) of each probe, in the order measured."""

    @property
    def mid(self) -> float:
        return (self.held + self.failed) / 2

    def text(self, unit: str) -> str:
        """`19.4 req/s [19.4, 22.7)`; an end the search did not measure is marked `~`."""
        low = f"{significant(self.held)}" if self.held_measured else f"~{significant(self.held)}"
        high = f"{significant(self.failed)}" if self.failed_measured else f"~{significant(self.failed)}"
        return f"{significant(self.held)} {unit} [{low}, {high})"


async def bisect(
    probe: Callable[[float], Awaitable[bool]],
    low: float,
    high: float,
    steps: int,
    *,
    geometric: bool = False,
    integer: bool = False,
) -> Band:
    """`steps` probes between `low` (taken to hold) and `high` (taken to fail): each at the midpoint
    (the geometric one for an axis such as prompt length, where the cost grows with the value;
    rounded for an integer axis), the range halved by its outcome. `probe(value)` says whether the
    SLO held there."""
    if not 0 <= low < high:
        raise ValueError(f"search range [{low!r}, {high!r}] must have 0 <= low < high")
    held, failed = low, high
    held_measured = failed_measured = False
    probes: list[tuple[float, bool]] = []
    for _ in range(steps):
        middle = math.sqrt(held * failed) if geometric and held > 0 else (held + failed) / 2
        if integer:
            middle = float(round(middle))
            if not held < middle < failed:
                break  # the band is one unit wide: nothing lies between
        ok = await probe(middle)
        probes.append((middle, ok))
        if ok:
            held, held_measured = middle, True
        else:
            failed, failed_measured = middle, True
    return Band(held, failed, held_measured, failed_measured, tuple(probes))
