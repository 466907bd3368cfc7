"""A step summarized: latencies of the measured window, the server's view, the two verdicts."""

from __future__ import annotations

import math

import pytest

from lab.load.client import RequestResult
from lab.load.metrics_reader import Histogram, Snapshot
from lab.profile.schema import PercentileSlo
from lab.profile.steps import Window, percentile_key, summarize
from lab.stats import percentile

SLO = PercentileSlo(ttft_seconds=0.5, tpot_seconds=0.05, percentile=0.9)
WINDOW = Window("rate", 10.0, start=0.0, settled=10.0, latency_end=28.0, end=30.0)


def ok(sent: float, ttft: float = 0.1, tpot: float = 0.02, e2e: float = 1.0) -> RequestResult:
    return RequestResult(sent, ttft, tpot, e2e, sent + e2e, 32)


def snapshots(
    waiting: list[float], *, start: float = 10.0, end: float = 30.0, running: float = 4.0
) -> list[Snapshot]:
    """Evenly spaced snapshots with the given waiting counts; 100 tokens a second generated."""
    n = len(waiting)
    times = [start + (end - start) * i / (n - 1) for i in range(n)]
    return [
        Snapshot(t, running, w, 0.5, 0.0, generation_tokens=100.0 * t)
        for t, w in zip(times, waiting, strict=True)
    ]


def test_percentiles_interpolate_and_keep_infinities() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, math.inf], 0.9) == math.inf
    assert math.isnan(percentile([], 0.9))
    assert (percentile_key(0.9), percentile_key(0.999)) == ("p90", "p99.9")


def test_only_the_measured_window_counts() -> None:
    """Requests sent while the step settled, or after its latency window, are not its latencies;
    completions in [settled, end] make its throughput."""
    outcomes = [ok(5.0, ttft=9.0)] + [ok(10.0 + i * 0.5, ttft=0.1) for i in range(36)] + [ok(29.0, ttft=9.0)]
    step = summarize(WINDOW, outcomes, [], snapshots([0.0] * 10), SLO)
    assert step.requests == 36 and step.ttft_seconds["p90"] == pytest.approx(0.1)
    assert step.achieved_rate == pytest.approx(37 / 20)
    assert step.slo_met and step.queue_stable and step.offered_rate == 10.0
    assert step.generation_tokens_per_second == pytest.approx(100.0)


def test_a_request_still_waiting_counts_with_the_time_it_waited() -> None:
    """A request without its first token at the step's end has waited at least that long (a lower
    bound of its TTFT), which can break the SLO; one already streaming brings its TTFT."""
    outcomes = [ok(10.0 + i, ttft=0.1) for i in range(8)]
    step = summarize(WINDOW, outcomes, [(20.0, None), (21.0, 0.2)], snapshots([0.0] * 10), SLO)
    assert step.requests == 10
    # TTFTs 0.1 (x8), 0.2 (streaming) and 10 (waited from 20 s to the end at 30 s):
    # p90 lies between the last two.
    assert step.ttft_seconds["p90"] == pytest.approx(0.2 + 0.1 * 9.8)
    assert not step.slo_met


def test_failed_requests_miss_the_slo() -> None:
    outcomes = [ok(10.0 + i) for i in range(8)] + [
        RequestResult(12.0, error="HTTP 503: full"),
        RequestResult(13.0, error="x"),
    ]
    step = summarize(WINDOW, outcomes, [], snapshots([0.0] * 10), SLO)
    assert step.errors == 2 and step.ttft_seconds["p90"] == math.inf and not step.slo_met


def test_tpot_above_the_slo_breaks_it() -> None:
    step = summarize(WINDOW, [ok(10.0 + i, tpot=0.06) for i in range(10)], [], snapshots([0.0] * 10), SLO)
    assert not step.slo_met


def test_a_queue_that_keeps_growing_is_unstable() -> None:
    """Waiting requests still climbing through the window's later half, significantly and by more
    than 5 % of the arrivals; a queue that found its level in the first half is stable."""
    outcomes = [ok(10.0 + i * 0.2) for i in range(100)]
    climbing = summarize(WINDOW, outcomes, [], snapshots([2.0 * i for i in range(20)]), SLO)
    assert not climbing.queue_stable and climbing.verdict == "failed"
    assert climbing.waiting_slope is not None and climbing.waiting_slope.low > 0
    settling = summarize(WINDOW, outcomes, [], snapshots([min(2.0 * i, 12.0) for i in range(20)]), SLO)
    assert settling.queue_stable, "a queue that climbs to a level and stays there is stable"


def test_above_95_percent_of_the_saturated_throughput_no_queue_is_stable() -> None:
    """At its saturated throughput a server's queue has no steady state, however calm the step looked."""
    outcomes = [ok(10.0 + i * 0.2) for i in range(100)]
    at = summarize(WINDOW, outcomes, [], snapshots([0.0] * 10), SLO, saturated_rate=10.0 / 0.95)
    above = summarize(WINDOW, outcomes, [], snapshots([0.0] * 10), SLO, saturated_rate=10.0 / 0.96)
    assert at.queue_stable and not above.queue_stable


def test_the_servers_latencies_come_from_histogram_deltas() -> None:
    """Server TTFT at the SLO percentile (interpolated in its bucket), mean TTFT and mean TPOT, from
    the first and last snapshot of the window."""
    first, last = snapshots([0.0, 0.0])
    bounds = (0.1, 0.5, math.inf)
    first = Snapshot(
        first.at,
        1,
        0,
        0,
        0,
        ttft=Histogram(bounds, (5, 5, 5), 0.2, 5),
        tpot=Histogram(bounds, (5, 5, 5), 0.1, 5),
    )
    last = Snapshot(
        last.at,
        1,
        0,
        0,
        0,
        ttft=Histogram(bounds, (5, 15, 15), 3.2, 15),
        tpot=Histogram(bounds, (15, 15, 15), 0.4, 15),
    )
    step = summarize(WINDOW, [ok(11.0)], [], [first, last], SLO)
    assert step.server_ttft_seconds == pytest.approx(0.1 + 0.4 * 0.9)
    assert step.server_ttft_mean_seconds == pytest.approx(0.3)
    assert step.server_tpot_seconds == pytest.approx(0.03)
