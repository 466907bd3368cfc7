"""The summary of a run through an upstream queue (`lab.demo.summary.summarize_upstream`): GPU-replica-hours
against a baseline, time at zero, wake-ups and the first message's wait after zero."""

from __future__ import annotations

import pytest

from lab.demo.decision.comparison import Comparison, Row
from lab.demo.summary import UpstreamFacts, summarize
from tests.lab.demo.ticks import tick

# Two replicas for 100 s, none for 200 s, one loading then serving for 100 s, none again.
RUN = [
    tick(0, 2),
    tick(100, 0, ready=0),
    tick(300, 1, ready=0, desired=3),
    tick(400, 0, ready=0, desired=0),
    tick(500, 0, ready=0, desired=0),
]
FACTS = UpstreamFacts(
    queue="inference-requests",
    sent=40,
    done=38,
    dead_lettered=2,
    lost=0,
    wake_waits=((290.0, 75.5, 88.0),),
    baseline_replica_hours=0.5,
    baseline_min_replicas=1,
)


def test_the_upstream_summary_counts_cost_time_at_zero_and_the_wake_up() -> None:
    summary = summarize(RUN, [], upstream=FACTS)
    upstream = summary.upstream
    assert upstream is not None
    assert upstream.replica_hours == pytest.approx((2 * 100 + 1 * 100) / 3600)
    assert upstream.saved == pytest.approx(1 - (300 / 3600) / 0.5)
    assert upstream.seconds_at_zero == 300.0
    assert upstream.wake_ups == 1
    assert (upstream.first_wait_after_zero, upstream.first_done_after_zero) == (75.5, 88.0)
    assert (upstream.messages_sent, upstream.dlq_depth, upstream.messages_lost) == (40, 2, 0)
    assert summary.peak_desired == 3
    text = summary.text()
    assert "inference-requests: 40 sent, 38 done, 2 in the DLQ, 0 lost" in text
    assert "0.08 GPU-replica-hours vs 0.50 with minReplicas 1 (83% saved)" in text
    assert "300 s at zero; 1 wake-up(s); first message after zero waited 75.5 s, done after 88.0 s" in text


def test_without_a_queue_or_a_baseline_those_lines_are_absent_or_say_so() -> None:
    assert summarize(RUN, []).upstream is None
    alone = summarize(RUN, [], upstream=UpstreamFacts("q", 0, 0, 0, 0))
    assert alone.upstream is not None and alone.upstream.saved is None
    assert "with minReplicas" not in alone.text()
    assert "first message after zero waited n/a" in alone.text()


def test_the_run_is_set_beside_the_same_day_backtested() -> None:
    """With a comparison the summary prints the run, the recommendation, foresight, the utilisation HPA
    and the fixed peak fleet, each with its attainment, replica-minutes and multiple of foresight's; the
    run's multiple is its own replica-minutes over foresight's. Without one, no such lines."""
    rows = Comparison(
        foresight=Row("foresight", "foresight", "knows the traffic", 1.0, 2.0),
        baselines=(
            Row("utilisation HPA", "gpu-util-80", "gpu", 1.0, 5.0),
            Row("fixed peak fleet", "fixed-peak", "fixed", 1.0, 6.0),
        ),
        recommended=Row("recommended", "anticipate-x0.8", "chosen", 0.995, 2.5),
    )
    summary = summarize(RUN, [], comparison=rows, policy="m AverageValue 0.5 req/s")
    text = summary.text()
    assert text.startswith("policy          m AverageValue 0.5 req/s\n")
    expected = summary.replica_minutes / 2.0
    assert (
        f"this run  {'':<10}{summary.slo_attainment:>7.1%}  "
        f"{summary.replica_minutes:>6.1f} replica-minutes  {expected:>5.2f}x foresight" in text
    )
    for label, multiple in (
        ("recommended", 1.25),
        ("foresight", 1.0),
        ("utilisation HPA", 2.5),
        ("fixed peak fleet", 3.0),
    ):
        line = next(line for line in text.splitlines() if line.strip().startswith(label))
        assert f"{multiple:.2f}x foresight" in line, line
    assert "(recommended: anticipate-x0.8)" in text
    assert "foresight" not in summarize(RUN, []).text()
