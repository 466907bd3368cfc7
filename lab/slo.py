"""The latency objective a request must meet to count as served well: one definition for the demo and
the backtest. (The profile's objective, a percentile of each latency over a window, is
`lab.profile.schema.PercentileSlo`.)"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slo:
    """The latency objective a request must meet to count as served well."""

    ttft: float = 0.5
    """Time to first token (seconds)."""
    tpot: float = 0.05
    """Mean time per output token (seconds)."""
