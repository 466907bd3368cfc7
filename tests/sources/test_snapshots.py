"""PromQL arithmetic over successive scrapes (adapter/sources/snapshots.py).

Expected values are computed by hand in each test (the arithmetic is in the comment or the id);
tests/integration/test_scrape_arithmetic.py checks the same functions against a real promtool.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from adapter.sources.page_parser import Labels, Page
from adapter.sources.snapshots import History, bucket_quantile, extrapolated_rate

DATA = Path(__file__).resolve().parent.parent / "data"
ENGINE0: Labels = (("engine", "0"), ("model_name", "m"))
T0 = 1_800_000_000.0


@pytest.mark.parametrize(
    ("points", "start", "end", "expected"),
    [
        # increase 120 over exactly the window, first value 0: no extrapolation -> 120 / 120
        pytest.param([(0, 0), (60, 60), (120, 120)], 0, 120, 1.0, id="samples span the window"),
        # increase 20 sampled over 20 s; 10 s to the start (< 1.1 x 10 s) is extrapolated, 30 s to
        # the end is not (half an interval, 5 s instead): 20 x 35/20 / 60
        pytest.param([(10, 100), (20, 110), (30, 120)], 0, 60, 35 / 60, id="extrapolate only near edges"),
        # increase (15 - 10) + 20 at the reset; sampled 30 s = window: 25 / 30
        pytest.param(
            [(0, 10), (10, 20), (20, 5), (30, 15)], 0, 30, 25 / 30, id="counter reset adds the last value"
        ),
        # 10 over 10 s; 50 s to the start, but the counter was 0 five seconds before the first
        # point (5/10 x 10 s): extrapolate 5 s, not 50: 10 x 15/10 / 60
        pytest.param([(50, 5), (60, 15)], 0, 60, 0.25, id="never extrapolate below zero"),
        # the promtool case of tests/integration: 19 x 60/45 / 60
        pytest.param(
            [(15, 10), (30, 20), (45, 3), (60, 9)],
            10,
            70,
            19 * 60 / 45 / 60,
            id="reset inside an offset window",
        ),
        pytest.param([(0, 5), (10, 5)], 0, 10, 0.0, id="flat counter has rate zero"),
    ],
)
def test_extrapolated_rate(
    points: list[tuple[float, float]], start: float, end: float, expected: float
) -> None:
    """rate() extrapolates as promql/functions.go extrapolatedRate does."""
    assert extrapolated_rate(points, start, end) == pytest.approx(expected, rel=1e-12)


def test_rate_needs_two_points() -> None:
    """One point has no slope; Prometheus drops the series, so do we."""
    assert extrapolated_rate([(10, 5)], 0, 60) is None
    assert extrapolated_rate([], 0, 60) is None


INF = math.inf


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        # rank 0.5 x 100 = 50 falls in (1, 2] holding 40..80: 1 + 1 x (50-40)/40
        pytest.param(0.5, [(1, 40), (2, 80), (INF, 100)], 1.25, id="linear interpolation inside a bucket"),
        # rank 20 in the first bucket, lower bound 0: 1 x 20/40
        pytest.param(0.2, [(1, 40), (2, 80), (INF, 100)], 0.5, id="first bucket starts at zero"),
        # rank 95 beyond the last finite bucket: its upper bound
        pytest.param(0.95, [(1, 40), (2, 80), (INF, 100)], 2.0, id="rank in the +Inf bucket"),
        pytest.param(0.5, [(1, 40), (2, 80)], math.nan, id="no +Inf bucket"),
        pytest.param(0.5, [(INF, 10)], math.nan, id="only the +Inf bucket"),
        pytest.param(0.5, [(1, 0), (INF, 0)], math.nan, id="no observations"),
        # buckets listed out of order and one dipping: sorted, then flattened to (1,40) (2,40) (3,80)
        pytest.param(0.75, [(3, 80), (INF, 80), (1, 40), (2, 30)], 2.5, id="unsorted and non-monotonic"),
        # two series of le=1 coalesce to 40: rank 40 -> end of first bucket
        pytest.param(0.5, [(1, 20), (1, 20), (INF, 80)], 1.0, id="equal bounds coalesce"),
        pytest.param(0.5, [(-1, 40), (INF, 80)], -1.0, id="first bound not positive"),
        pytest.param(-0.1, [(1, 40), (INF, 80)], -INF, id="q below zero"),
        pytest.param(1.1, [(1, 40), (INF, 80)], INF, id="q above one"),
    ],
)
def test_bucket_quantile(q: float, buckets: list[tuple[float, float]], expected: float) -> None:
    """histogram_quantile() as promql/quantile.go bucketQuantile computes it."""
    got = bucket_quantile(q, buckets)
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(expected, rel=1e-12)


def counter_page(values: dict[str, float], labels: Labels = ENGINE0) -> Page:
    return {name: {labels: value} for name, value in values.items()}


def test_history_keeps_only_the_retention() -> None:
    """Entries older than `retention` before the newest are dropped; the window is inclusive."""
    history = History(retention=10.0)
    for t in range(0, 31, 5):
        history.add(float(t), counter_page({"c": float(t)}), ["c"])
    assert [e.time for e in history.entries] == [20.0, 25.0, 30.0]
    assert [e.time for e in history.window(20.0, 30.0).entries] == [20.0, 25.0, 30.0]
    assert [e.time for e in history.window(20.1, 29.9).entries] == [25.0]


def test_unchanged_series_share_one_schema() -> None:
    """Consecutive scrapes with the same series share a schema: a snapshot is one small array."""
    history = History(retention=60.0)
    history.add(0.0, counter_page({"c": 1.0}), ["c"])
    history.add(1.0, counter_page({"c": 2.0}), ["c"])
    history.add(2.0, counter_page({"c": 3.0, "d": 1.0}), ["c", "d"])
    first, second, third = history.entries
    assert first.schema is second.schema
    assert third.schema is not second.schema


@pytest.mark.parametrize(
    "pages",
    [
        pytest.param([{"c": 0.0}, {"c": 10.0}, {"c": 20.0}, {"c": 30.0}], id="steady"),
        pytest.param([{"c": 0.0}, {"c": 10.0}, {"c": 4.0}, {"c": 14.0}], id="reset"),
        pytest.param([{"c": 0.0}, {"c": 10.0, "d": 1.0}, {"c": 20.0}, {"c": 30.0}], id="schema change"),
    ],
)
def test_window_rate_equals_point_by_point_rate(pages: list[dict[str, float]]) -> None:
    """The first/last fast path and the point-by-point path agree with `extrapolated_rate`."""
    history = History(retention=60.0)
    for i, values in enumerate(pages):
        history.add(10.0 * i, counter_page(values), sorted(values))
    points = [(10.0 * i, values["c"]) for i, values in enumerate(pages)]
    assert history.window(0.0, 40.0).rate(("c", ENGINE0)) == pytest.approx(
        extrapolated_rate(points, 0.0, 40.0)
    )


def test_a_reset_is_flagged_even_across_a_schema_change() -> None:
    """A counter that went down is a reset whether or not other series changed meanwhile."""
    history = History(retention=60.0)
    history.add(0.0, counter_page({"c": 10.0}), ["c"])
    history.add(1.0, counter_page({"c": 2.0, "d": 0.0}), ["c", "d"])
    assert history.entries[-1].reset
