"""Successive scrapes of one pod, and the PromQL arithmetic over them.

The scrape source must mean exactly what the Prometheus source means, so the two PromQL functions it
replaces are reimplemented as Prometheus 2.x evaluates them: `rate()` (`extrapolatedRate` in
promql/functions.go: counter resets, extrapolation to the window edges, the zero-point cut-off) and
`histogram_quantile()` (`bucketQuantile` in promql/quantile.go: coalesced, monotonic buckets, linear
interpolation, the +Inf rule). tests/integration/test_scrape_arithmetic.py holds them to promtool.

History is kept compactly: for each pod, one array of counter values per scrape, aligned to a
schema (the tuple of series keys) that is shared while the pod's series do not change. A rate then
needs only the first and last entries of the window, unless a counter reset or a schema change
inside the window asks for the point-by-point path.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from adapter.sources.page_parser import Labels, Page

SeriesKey = tuple[str, Labels]

# Prometheus extrapolates a rate to a window edge only if the gap to it is below 1.1 average
# scrape intervals (promql/functions.go); beyond, it assumes the series started or stopped there.
_EXTRAPOLATION_THRESHOLD = 1.1


def extrapolated_rate(points: Sequence[tuple[float, float]], start: float, end: float) -> float | None:
    """PromQL `rate()` of a counter over the range `[start, end]` from its points in that range
    (ascending time); `None` with fewer than two points, as Prometheus drops such a series."""
    if len(points) < 2:
        return None
    increase = points[-1][1] - points[0][1]
    previous = points[0][1]
    for _, value in points[1:]:
        if value < previous:  # a counter reset: the process restarted from zero
            increase += previous
        previous = value
    return _extrapolate(increase, points[0], points[-1][0], len(points), start, end)


def _extrapolate(
    increase: float, first: tuple[float, float], last_time: float, count: int, start: float, end: float
) -> float | None:
    first_time, first_value = first
    sampled = last_time - first_time
    if sampled <= 0:
        return None
    to_start = first_time - start
    to_end = end - last_time
    average = sampled / (count - 1)
    if increase > 0 and first_value >= 0:
        # A counter cannot go below zero: do not extrapolate the start past where it was zero.
        to_start = min(to_start, sampled * (first_value / increase))
    threshold = average * _EXTRAPOLATION_THRESHOLD
    covered = sampled
    covered += to_start if to_start < threshold else average / 2
    covered += to_end if to_end < threshold else average / 2
    return increase * (covered / sampled) / (end - start)


def bucket_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float:
    """PromQL `histogram_quantile(q, ...)` of (upper bound, cumulative count) pairs; NaN when the
    histogram has no +Inf bucket, fewer than two buckets, or no observations."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    coalesced: dict[float, float] = {}
    for upper, count in buckets:
        coalesced[upper] = coalesced.get(upper, 0.0) + count
    ordered = sorted(coalesced.items())
    if not ordered or not math.isinf(ordered[-1][0]) or len(ordered) < 2:
        return math.nan
    counts = []
    highest = -math.inf
    for _, count in ordered:  # rates of a scrape racing an observation can dip; Prometheus flattens
        highest = max(highest, count)
        counts.append(highest)
    observations = counts[-1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = bisect.bisect_left(counts, rank, 0, len(counts) - 1)
    if b == len(counts) - 1:
        return ordered[-2][0]
    if b == 0 and ordered[0][0] <= 0:
        return ordered[0][0]
    bucket_start, bucket_end, count = 0.0, ordered[b][0], counts[b]
    if b > 0:
        bucket_start = ordered[b - 1][0]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return bucket_start + (bucket_end - bucket_start) * (rank / count)


class _Schema:
    """The series keys of one or more consecutive scrapes, with their positions in the value array."""

    __slots__ = ("by_name", "index", "keys")

    def __init__(self, keys: tuple[SeriesKey, ...]) -> None:
        self.keys = keys
        self.index = {key: i for i, key in enumerate(keys)}
        self.by_name: dict[str, list[Labels]] = {}
        for name, labels in keys:
            self.by_name.setdefault(name, []).append(labels)


@dataclass(slots=True)
class _Entry:
    time: float
    schema: _Schema
    values: array[float]
    reset: bool
    """Some counter decreased since the previous entry."""


@dataclass
class History:
    """One pod's cumulative series (histogram `_bucket`/`_sum`/`_count`) over the last `retention` s."""

    retention: float
    entries: deque[_Entry] = field(default_factory=deque)

    def add(self, time: float, page: Page, names: Iterable[str]) -> None:
        """Record the cumulative series `names` of a page scraped at `time`; forget what is too old."""
        keys = tuple((name, labels) for name in names for labels in page.get(name, ()))
        previous = self.entries[-1] if self.entries else None
        schema = previous.schema if previous is not None and previous.schema.keys == keys else _Schema(keys)
        values = array("d", (page[name][labels] for name, labels in keys))
        reset = False
        if previous is not None:
            if previous.schema is schema:
                reset = any(new < old for new, old in zip(values, previous.values, strict=True))
            else:
                old_index = previous.schema.index
                reset = any(
                    values[i] < previous.values[j]
                    for i, key in enumerate(keys)
                    if (j := old_index.get(key)) is not None
                )
        self.entries.append(_Entry(time, schema, values, reset))
        horizon = time - self.retention
        while self.entries and self.entries[0].time < horizon:
            self.entries.popleft()

    def window(self, start: float, end: float) -> Window:
        """The entries scraped in `[start, end]` (both ends included, as in Prometheus 2.x)."""
        times = [e.time for e in self.entries]
        lo = bisect.bisect_left(times, start)
        hi = bisect.bisect_right(times, end)
        return Window(list(self.entries)[lo:hi], start, end)


class Window:
    """A pod's history inside one rate window."""

    def __init__(self, entries: list[_Entry], start: float, end: float) -> None:
        self.entries = entries
        self.start = start
        self.end = end
        latest = entries[-1].schema if entries else None
        self.latest = latest
        # The fast path reads only the first and last entries; it holds while every entry has the
        # same series and no counter went down in between.
        self._fast = latest is not None and all(e.schema is latest and not e.reset for e in entries[1:])
        if self._fast and entries and entries[0].schema is not latest:
            self._fast = False

    def labels(self, name: str) -> list[Labels]:
        """Label sets of `name` in the latest scrape of the window."""
        return self.latest.by_name.get(name, []) if self.latest is not None else []

    def rate(self, key: SeriesKey) -> float | None:
        """PromQL `rate()` of one series over the window; `None` with fewer than two points."""
        entries = self.entries
        if self._fast:
            assert self.latest is not None
            i = self.latest.index.get(key)
            if i is None or len(entries) < 2:
                return None
            first, last = entries[0], entries[-1]
            increase = last.values[i] - first.values[i]
            return _extrapolate(
                increase, (first.time, first.values[i]), last.time, len(entries), self.start, self.end
            )
        points = [(e.time, e.values[j]) for e in entries if (j := e.schema.index.get(key)) is not None]
        return extrapolated_rate(points, self.start, self.end)
