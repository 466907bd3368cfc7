"""The arithmetic of a Prometheus read, on query results as Prometheus returns them (NaN: no sample).

The queries themselves run against a real Prometheus in tests/integration/test_backtest_prometheus.py.
"""

from __future__ import annotations

import math

import pytest

from lab.backtest.inputs.prometheus_history import PrometheusHistoryError, RangeRequest, assemble, queries

NAN = math.nan


def _series(**changes: list[float]) -> dict[str, list[float]]:
    n = len(next(iter(changes.values())))
    base = {name: [NAN] * n for name in queries("", "30s")}
    base.update(samples=[6.0] * n, replicas=[1.0] * n)
    base.update(changes)
    return base


def test_arrivals_are_completions_plus_the_change_in_flight_plus_rejections() -> None:
    history = assemble(
        _series(finished=[0, 10, 10, 10], running=[2, 4, 4, 3], waiting=[0, 5, 9, 0], rejected=[0, 0, 3, 0]),
        start=0.0,
        step=30.0,
        source="t",
    )
    # Point 0 only opens the range: steps are (0, 30], (30, 60], (60, 90].
    assert history.arrivals == (10 + 7, 10 + 4 + 3, 10 - 10)
    assert history.notes == ()


def test_a_negative_count_is_carried_so_the_total_is_kept() -> None:
    history = assemble(
        _series(finished=[0, 1, 5], running=[4, 0, 0], waiting=[0, 0, 0], rejected=[0, 0, 0]),
        start=0.0,
        step=1.0,
        source="t",
    )
    assert history.arrivals == (0.0, 2.0)  # 1 - 4 = -3 carried: 5 - 3 = 2
    assert "negative arrival count" in history.notes[0]


def test_no_rejection_counter_means_none_were_rejected_and_says_so() -> None:
    history = assemble(
        _series(finished=[0, 1, 1], running=[0, 0, 0], waiting=[0, 0, 0]), start=0.0, step=1.0, source="t"
    )
    assert history.arrivals == (1.0, 1.0)
    assert "no vllm:admission_rejections_total" in history.notes[0]


def test_a_step_without_samples_or_partly_scraped_is_unknown() -> None:
    history = assemble(
        _series(
            finished=[0, 1, NAN, 1, 1, 1],
            running=[0] * 6,
            waiting=[0] * 6,
            rejected=[0] * 6,
            samples=[6, 6, 0, 3, 6, 6],
        ),
        start=0.0,
        step=1.0,
        source="t",
    )
    assert history.arrivals[0] == 1.0 and math.isnan(history.arrivals[1]) and math.isnan(history.arrivals[2])
    assert [(g.start, g.end) for g in history.gaps()] == [(1.0, 3.0)]


@pytest.mark.parametrize(
    ("start", "end", "step", "message"),
    [
        pytest.param(100.0, 50.0, 30.0, "is empty or inverted", id="inverted"),
        pytest.param(100.0, 100.0, 30.0, "is empty or inverted", id="empty"),
        pytest.param(0.0, 50.0, 30.0, "holds fewer than 2 steps of 30 s", id="shorter than two steps"),
    ],
)
def test_a_range_that_cannot_be_read_says_why(start: float, end: float, step: float, message: str) -> None:
    with pytest.raises(PrometheusHistoryError, match=message):
        RangeRequest("http://127.0.0.1:9090", start, end, step)
