"""Smoothing for the scrape source: a gauge served as its mean over a window (`metrics.<name>.smoothing`).

The Prometheus source smooths in PromQL, each series over the window before aggregating
(`promql.expressions.smoothed`). The scrape source holds only each pod's latest page for gauges, so it smooths
the other way round: per key (metric, namespace, selector) it keeps the value it computed from each
scrape round, and serves the mean of the rounds inside the window, one round one weight, as
`avg_over_time` weighs one sample one weight. The two agree on a steady fleet scraped in step; they
differ where pods come and go (below), and the difference is documented, not hidden.

What a window holds, and what it never holds:

* Only values the source would have served unsmoothed: a round whose fetch failed (a pod down
  under `on_partial: error`, a target not scraped, no targets) raises before anything is recorded,
  so a failed scrape is never averaged in as a zero. That round's error is what is served.
* A round whose value is not a clean number of the gauge (a gauge gap on a present pod, no value
  at all) is served as it is, for the provider to answer 503, and is not recorded; a NaN or
  infinite value is recorded, so the mean is non-finite (503) for as long as it stays in the
  window, as `avg_over_time` over a NaN sample is.
* A window not yet full (a key asked for the first time, or after the adapter started) serves the
  mean of the rounds it has: after one round that is the latest value. Nothing is extrapolated.
* A pod that vanishes mid-window (scaled down, or left discovery) weighs in the rounds it was part
  of and in none after: its share of the mean fades out over one window. A pod that appears weighs
  in from its first round on. (Prometheus instead drops a vanished pod's series from the mean at
  once and adds a new pod's mean of its own samples in full.)
* The sample time served is that of the latest round (the newest raw samples), so `max_age`
  judges the latest round as it judges an unsmoothed value: the mean never hides a stalled scrape.

A round is known by its sample time: a key refreshed twice in one round records it once. A key
nobody asks for stops being refreshed by the cache; its history is dropped once it is a window old.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable
from typing import NamedTuple

from adapter.sources import Sample


class _Round(NamedTuple):
    """One recorded round: its sample time and the value computed from it."""

    time: float
    value: float


class Smoother:
    """Per key, the values of the scrape rounds inside the smoothing window, and their mean."""

    def __init__(self) -> None:
        self._rounds: dict[Hashable, deque[_Round]] = {}
        self._windows: dict[Hashable, float] = {}
        # Idle histories are looked for at most once per window, so a fetch costs O(1) on average.
        self._swept_at = -math.inf

    def __len__(self) -> int:
        """Keys holding a history (for tests and telemetry)."""
        return len(self._rounds)

    def smoothed(self, key: Hashable, sample: Sample, window: float) -> Sample:
        """`sample` (this round's value of `key`) with its value replaced by the mean over the rounds
        of the last `window` seconds, this one included; `sample` itself when it is not a value of
        the gauge (gaps, or `None`), which is then not recorded either."""
        now = sample.timestamp
        if sample.value is None or sample.gaps or not math.isfinite(now):
            return sample  # not a value of the gauge (or undatable): the provider answers 503
        rounds = self._rounds.get(key)
        if rounds is None:
            rounds = self._rounds[key] = deque()
        self._windows[key] = window
        if rounds and now < rounds[-1].time:
            # The clock stepped back: rounds "after" now cannot be ordered against it.
            rounds.clear()
        if rounds and rounds[-1].time == now:
            rounds[-1] = _Round(now, sample.value)  # the same round, fetched again
        else:
            rounds.append(_Round(now, sample.value))
        # The rounds within (now - window, now], as Prometheus 3 reads a range: rounds dated on the
        # ticks fill a full window with window / interval of them, not one more.
        while rounds[0].time <= now - window:
            rounds.popleft()
        self._sweep(now, window)
        return sample._replace(value=_mean([r.value for r in rounds]))

    def _sweep(self, now: float, window: float) -> None:
        """Drop the histories whose newest round left their window (keys the cache no longer refreshes)."""
        if now - self._swept_at < window:
            return
        self._swept_at = now
        windows = self._windows
        for key in [k for k, rounds in self._rounds.items() if rounds[-1].time <= now - windows[k]]:
            del self._rounds[key], windows[key]


def _mean(values: list[float]) -> float:
    """The arithmetic mean; exact for finite values, IEEE (NaN, ±Inf) once one is not finite."""
    if all(math.isfinite(v) for v in values):
        return math.fsum(values) / len(values)
    return sum(values) / len(values)
