"""Recorded traffic on a regular time grid: what a backtest replays, and what a capacity fit reads.

A `History` holds one value per step for each series it knows; a series nobody recorded is `None`
and a step nobody recorded is NaN. Missing data stays missing: `gaps()` reports it and the
simulation skips it (`segments()`), it is never read as zero traffic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

Series = tuple[float, ...]

#: the optional series a history may carry, besides `arrivals`
OPTIONAL_SERIES: Final = (
    "completions",
    "running",
    "waiting",
    "replicas",
    "kv_usage",
    "ttft_mean",
    "tpot_mean",
    "prompt_tokens",
    "output_tokens",
)


class HistoryError(ValueError):
    """Recorded traffic that cannot be replayed; the message names the series or the range."""


@dataclass(frozen=True)
class Gap:
    """A stretch of the range without data (seconds from the history's start)."""

    start: float
    end: float

    @property
    def seconds(self) -> float:
        """How long the gap lasts."""
        return self.end - self.start


@dataclass(frozen=True)
class History:
    """Series on a grid of `step` seconds from `start`; every series has one value per step."""

    step: float
    arrivals: Series
    """Requests that arrived during each step (fractional where recovered from rates); NaN unknown."""
    start: float = 0.0
    """Time of the first step: Unix seconds for Prometheus, the file's own clock for a trace."""
    source: str = ""
    """Where the data came from, for the record (`trace demo.csv`, `prometheus http://...`)."""
    completions: Series | None = None
    """Requests finished during each step."""
    running: Series | None = None
    """Requests running at the end of the step, summed over replicas."""
    waiting: Series | None = None
    """Requests waiting at the end of the step, summed over replicas."""
    replicas: Series | None = None
    """Replicas serving (reporting metrics) during the step."""
    kv_usage: Series | None = None
    """Mean KV-cache usage over replicas (0-1)."""
    ttft_mean: Series | None = None
    """Mean time to first token of the requests of the step (seconds)."""
    tpot_mean: Series | None = None
    """Mean time per output token of the requests of the step (seconds)."""
    prompt_tokens: Series | None = None
    """Mean prompt tokens per request of the step."""
    output_tokens: Series | None = None
    """Mean output tokens per request of the step."""
    notes: tuple[str, ...] = field(default=())
    """What the reader noticed (counter resets, dropped series), for the record."""

    def __post_init__(self) -> None:
        if not self.step > 0:
            raise HistoryError(f"history step {self.step!r} must be a positive number of seconds")
        if not self.arrivals:
            raise HistoryError(f"history from {self.source or 'the input'} has no steps")
        for name in OPTIONAL_SERIES:
            series = getattr(self, name)
            if series is not None and len(series) != len(self.arrivals):
                raise HistoryError(
                    f"history series {name!r} has {len(series)} steps, arrivals has {len(self.arrivals)}"
                )
        if all(math.isnan(a) for a in self.arrivals):
            raise HistoryError(f"history from {self.source or 'the input'} has no arrivals in any step")

    @property
    def duration(self) -> float:
        """Seconds covered by the grid, gaps included."""
        return self.step * len(self.arrivals)

    @property
    def known_seconds(self) -> float:
        """Seconds with a known arrival count."""
        return self.step * sum(1 for a in self.arrivals if not math.isnan(a))

    @property
    def requests(self) -> float:
        """Requests that arrived in the known steps."""
        return sum(a for a in self.arrivals if not math.isnan(a))

    def gaps(self) -> list[Gap]:
        """Runs of steps whose arrivals are unknown, in order."""
        found: list[Gap] = []
        begin: int | None = None
        for index, value in enumerate((*self.arrivals, 0.0)):
            if math.isnan(value) and begin is None:
                begin = index
            elif not math.isnan(value) and begin is not None:
                found.append(Gap(begin * self.step, index * self.step))
                begin = None
        return found

    def segments(self) -> Iterator[tuple[int, int]]:
        """(first, end) step indices of each run of known arrivals: what can be simulated."""
        begin: int | None = None
        for index, value in enumerate((*self.arrivals, math.nan)):
            if not math.isnan(value) and begin is None:
                begin = index
            elif math.isnan(value) and begin is not None:
                yield begin, index
                begin = None

    def rates(self) -> list[float]:
        """Arrivals per second in each step (NaN where unknown)."""
        return [a / self.step for a in self.arrivals]

    def peak_rate(self, window: float = 60.0) -> float:
        """The highest arrival rate over any `window` seconds of known data (req/s)."""
        width = max(1, round(window / self.step))
        return max(
            (self._window_peak(first, end, width) for first, end in self.segments()),
            default=0.0,
        )

    def _window_peak(self, first: int, end: int, width: int) -> float:
        values = self.arrivals[first:end]
        span = min(width, len(values))
        total = best = sum(values[:span])
        for index in range(span, len(values)):
            total += values[index] - values[index - span]
            best = max(best, total)
        return best / (span * self.step)

    def known(self, name: str) -> bool:
        """Whether the optional series `name` was recorded at all."""
        return getattr(self, name) is not None
