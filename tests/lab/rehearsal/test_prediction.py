"""The prediction: the backtest of what the clients sent, with the policy and the measured cold start."""

from __future__ import annotations

import math

import pytest

from lab.backtest.calibration import given
from lab.backtest.history import History
from lab.backtest.policy import Policy
from lab.demo.summary import summarize
from lab.records import Tick
from lab.rehearsal.clients import Sent
from lab.rehearsal.load import Load
from lab.rehearsal.prediction import gap, measured_cold_start, planned_history, predict, sent_history
from lab.rehearsal.replicas import ColdStart
from lab.slo import Slo


def tick(t: float, replicas: int) -> Tick:
    return Tick(
        t=t,
        stage="load",
        offered_rps=1.0,
        sent_rps=1.0,
        completed_rps=1.0,
        waiting=0,
        running=1,
        kv_usage=0.1,
        tpot_p90=None,
        ttft_p90=None,
        metric=1.0,
        desired=replicas,
        ready=replicas,
        replicas=replicas,
    )


def test_the_sent_requests_become_a_trace_on_a_one_second_grid() -> None:
    sent = [Sent(0.2, 64, 8), Sent(0.9, 64, 12), Sent(2.5, 64, 20)]
    history = sent_history(sent, until=4.0, start_replicas=2, source="s")
    assert history.arrivals == (2.0, 0.0, 1.0, 0.0)
    assert history.output_tokens is not None and history.output_tokens[0] == 10.0
    assert math.isnan(history.output_tokens[1])
    assert history.replicas is not None and history.replicas[0] == 2.0


def test_the_cold_start_is_what_the_hpa_waited_for_the_replicas_it_asked_for() -> None:
    records = [
        ColdStart("r1", -40.0, initial=True, spawned=-40.0, healthy=-5.0),
        ColdStart("r2", 100.0, spawned=101.0, healthy=131.0),
        ColdStart("r3", 115.0, spawned=120.0, healthy=155.0),
        ColdStart("r4", 300.0, spawned=300.0),  # taken away while loading: never Ready
    ]
    assert measured_cold_start(records) == pytest.approx((31.0 + 40.0) / 2)
    assert measured_cold_start(records[:1]) == pytest.approx(35.0)
    assert measured_cold_start([ColdStart("r1", 0.0, initial=True)]) is None


def test_the_backtest_scales_on_the_sent_load_and_pays_the_measured_cold_start() -> None:
    # One replica's worth for a minute, then four, for five minutes.
    # `given` sizes a request at the real run's 288 output tokens: these cost one request each.
    sent = [Sent(i / 2.0, 64, 288) for i in range(120)]
    sent += [Sent(60 + i / 8.0, 64, 288) for i in range(8 * 300)]
    history = sent_history(sent, until=360.0, start_replicas=1, source="s")
    calibration = given(3.0, slots=16)
    policy = Policy("p", target=8.0, max_replicas=6, downscale_stabilization=60.0)
    quick = predict(policy, calibration, history, Slo(2.0, 1.0), cold_start=10.0)
    slow = predict(policy, calibration, history, Slo(2.0, 1.0), cold_start=90.0)
    assert quick.policy.cold_start == 10.0 and quick.scorecard.requests == pytest.approx(len(sent))
    assert quick.scorecard.peak_replicas >= 3
    # A longer wait for the same replicas leaves the spike queued for longer.
    assert slow.scorecard.slo_attainment < quick.scorecard.slo_attainment


def test_the_gap_is_the_backtests_minus_the_rehearsals() -> None:
    history = sent_history([Sent(1.0, 64, 8)], until=60.0, start_replicas=1, source="s")
    predicted = predict(Policy("p", target=8.0), given(3.0, slots=16), history, Slo(2.0, 1.0), 10.0)
    summary = summarize([tick(t=0.0, replicas=2), tick(t=60.0, replicas=2)], [], Slo(2.0, 1.0))
    compared = gap(summary, predicted)
    assert compared.demo_replica_minutes == pytest.approx(2.0)
    assert compared.replica_minutes_ratio == pytest.approx(predicted.scorecard.replica_minutes / 2.0 - 1)
    assert compared.slo_points == pytest.approx(100 * (predicted.scorecard.slo_attainment - 1.0))


def test_the_band_plays_the_trace_then_nothing_until_the_runs_end() -> None:
    """The live replica-minutes count the drain after the trace's last step; the band's must too: a
    run 9.8 s past a 600 s trace gets one more step of nothing sent, its tokens carried over."""
    trace = History(
        step=10.0,
        arrivals=(30.0,) * 60,
        source="t",
        output_tokens=(2048.0,) * 60,
    )
    planned = planned_history(Load(trace), 609.8, 1)
    assert len(planned.arrivals) == 61 and planned.arrivals[-1] == 0.0
    assert planned.arrivals[:60] == (30.0,) * 60
    assert planned.output_tokens is not None and planned.output_tokens[-1] == 2048.0
    assert planned.replicas is not None and planned.replicas[0] == 1.0
    # a run cut before the trace's end plays only what it reached
    assert len(planned_history(Load(trace), 95.0, 1).arrivals) == 10
