"""The fleet model driven by the HPA model: conservation, queueing, scaling, zero replicas, gaps, lag."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from lab.backtest.calibration import ServiceModel
from lab.backtest.history import History
from lab.backtest.outcome import outcome
from lab.backtest.plans import foresight_plan
from lab.backtest.policy import PIPELINES, Forecast, Guard, Pipeline, Policy, anticipating
from lab.backtest.reading import forecast
from lab.backtest.simulate import simulate
from lab.demo.decision.validation import demo_policy
from lab.slo import Slo

MODEL = ServiceModel(
    capacity=10.0, slots=20.0, shape=20.0, ttft_base=0.02, output_tokens=300.0, kv_per_request=0.04
)
SLO = Slo(ttft=0.5, tpot=0.05)
INFLIGHT = Policy(
    "inflight-10", metric="vllm_requests_inflight", target=10.0, max_replicas=10, cold_start=30.0
)


def _history(*rates: tuple[float, int]) -> History:
    """Steady rates for a number of seconds each."""
    return History(step=1.0, arrivals=tuple(r for rate, seconds in rates for r in [rate] * seconds))


def test_every_request_is_served_or_dropped_or_still_queued() -> None:
    """Served (admitted) + dropped + still waiting = arrived; `in flight at the end` adds the batch."""
    history = _history((5.0, 300), (40.0, 300), (0.0, 60))
    run = simulate(replace(INFLIGHT, kind="fixed", replicas=2), MODEL, history, SLO)
    assert run.arrived == pytest.approx(history.requests)
    still_waiting = run.arrived - run.tally.served - run.tally.dropped
    assert still_waiting == pytest.approx(300 * (40 - 20) - 60 * 20, rel=0.01)
    assert run.waiting_end == pytest.approx(still_waiting + 2 * MODEL.slots, rel=0.01)


def test_below_capacity_nothing_waits_and_every_request_meets_the_slo() -> None:
    run = simulate(replace(INFLIGHT, kind="fixed", replicas=2), MODEL, _history((15.0, 600)), SLO)
    result = outcome(run, MODEL, SLO)
    assert result.slo_attainment == 1.0
    assert result.ttft_p99 == pytest.approx(MODEL.ttft_base)
    assert result.gpu_hours == pytest.approx(2 * 600 / 3600)


def test_above_capacity_a_fixed_fleet_builds_a_queue() -> None:
    """12 req/s on one replica of 10: the queue grows by 2 a second, TTFT by a second every 5."""
    run = simulate(replace(INFLIGHT, kind="fixed", replicas=1), MODEL, _history((12.0, 300)), SLO)
    result = outcome(run, MODEL, SLO)
    assert run.waiting_end == pytest.approx(2 * 300 + MODEL.slots, rel=0.05)
    assert result.slo_attainment < 0.1
    # The last requests served arrived ~50 s earlier (600 queued at 12/s ahead of them).
    assert result.ttft_p99 is not None and result.ttft_p99 > 40


def test_the_hpa_model_scales_the_fleet_up_after_the_cold_start_and_back_down() -> None:
    """A step from 5 to 40 req/s: the HPA (lab.hpa) asks for more replicas, they serve after their
    cold start, and after the 300 s scale-down window the fleet shrinks again (cheaper than holding
    its peak)."""
    history = _history((5.0, 300), (40.0, 300), (5.0, 900))
    result = outcome(simulate(INFLIGHT, MODEL, history, SLO), MODEL, SLO)
    assert result.peak_replicas >= 4
    assert result.scale_events >= 2
    # The cold start and the sync period cost some requests their TTFT, not most.
    assert 0.8 < result.slo_attainment < 1.0
    fixed = simulate(replace(INFLIGHT, kind="fixed", replicas=result.peak_replicas), MODEL, history, SLO)
    assert result.gpu_hours < outcome(fixed, MODEL, SLO).gpu_hours


def test_a_shorter_cold_start_serves_more_requests_in_time() -> None:
    history = _history((5.0, 300), (40.0, 300), (5.0, 300))
    slow = outcome(simulate(replace(INFLIGHT, cold_start=120.0), MODEL, history, SLO), MODEL, SLO)
    fast = outcome(simulate(replace(INFLIGHT, cold_start=5.0), MODEL, history, SLO), MODEL, SLO)
    assert fast.slo_attainment > slow.slo_attainment


def test_a_lagging_metric_pipeline_scales_later() -> None:
    history = _history((5.0, 300), (40.0, 300))
    fresh = outcome(
        simulate(replace(INFLIGHT, pipeline=PIPELINES["scrape"]), MODEL, history, SLO), MODEL, SLO
    )
    late = outcome(
        simulate(replace(INFLIGHT, pipeline=Pipeline(15.0, 60.0)), MODEL, history, SLO), MODEL, SLO
    )
    assert late.slo_attainment < fresh.slo_attainment


def test_at_zero_replicas_only_a_durable_queue_keeps_the_requests() -> None:
    """queue_depth with minReplicas 0 wakes the fleet from the upstream queue (nothing dropped); a
    fleet at 0 without it would refuse every request (a Service without endpoints)."""
    history = _history((0.0, 600), (5.0, 300), (0.0, 900))
    queue = Policy("queue", metric="queue_depth", target=5.0, min_replicas=0, max_replicas=4, cold_start=30.0)
    run = simulate(queue, MODEL, history, SLO)
    assert run.tally.dropped == 0
    assert run.tally.served == pytest.approx(1500, rel=0.01)
    assert run.tally.replica_seconds < 900 * 4  # it sat at zero while idle
    fixed_zero = simulate(replace(INFLIGHT, kind="fixed", replicas=0, min_replicas=0), MODEL, history, SLO)
    assert fixed_zero.tally.dropped == pytest.approx(1500)


def test_the_utilisation_baseline_reads_full_and_climbs_to_the_maximum() -> None:
    """GPU busy fraction reads near 100 % at any load, so an 80 % target keeps adding replicas: half a
    replica's load ends on five of them."""
    gpu = Policy("gpu", metric="gpu_utilization", target=80.0, max_replicas=6, cold_start=30.0)
    result = outcome(simulate(gpu, MODEL, _history((5.0, 1200)), SLO), MODEL, SLO)
    assert result.peak_replicas >= 5


def test_a_gap_is_not_replayed_as_silence() -> None:
    """The segments around a gap are simulated on their own: no replica-hours or requests in the gap."""
    arrivals = [8.0] * 300 + [math.nan] * 600 + [8.0] * 300
    history = History(step=1.0, arrivals=tuple(arrivals))
    run = simulate(replace(INFLIGHT, kind="fixed", replicas=1), MODEL, history, SLO)
    assert run.seconds == 600
    assert run.tally.replica_seconds == pytest.approx(600)


def test_the_same_inputs_give_the_same_run() -> None:
    history = _history((5.0, 300), (40.0, 300), (5.0, 300))
    first = outcome(simulate(INFLIGHT, MODEL, history, SLO), MODEL, SLO)
    second = outcome(simulate(INFLIGHT, MODEL, history, SLO), MODEL, SLO)
    assert first == second


def test_foresight_starts_replicas_one_cold_start_ahead() -> None:
    arrivals = [5.0] * 300 + [40.0] * 300
    policy = replace(INFLIGHT, kind="foresight", cold_start=60.0, sync_period=15.0)
    plan = foresight_plan(policy, MODEL.knee_rate(SLO.tpot), arrivals, 1.0)
    first_rise = next(i for i, p in enumerate(plan) if p > plan[0])
    assert 300 - 60 - 15 - 5 <= first_rise <= 300 - 60
    result = outcome(simulate(policy, MODEL, _history((5.0, 300), (40.0, 300)), SLO), MODEL, SLO)
    assert result.slo_attainment == 1.0


def test_foresight_sizes_at_the_knee_for_the_slo_not_at_saturation() -> None:
    """A replica at 90 % of capacity runs a batch whose TPOT misses the SLO: foresight sizes the fleet at
    the rate where TPOT still holds, so it meets the SLO where a fleet sized at saturation would not."""
    model = ServiceModel(capacity=1.44, slots=27.0, shape=19.4, ttft_base=0.3, output_tokens=288.0)
    knee = model.knee_rate(SLO.tpot)
    assert knee < 0.9 * model.capacity
    assert model.tpot(model.batch_at(knee)) <= SLO.tpot < model.tpot(model.batch_at(0.9 * model.capacity))
    history = _history((1.0, 600), (2.5, 1200), (1.0, 600))
    policy = Policy("foresight", kind="foresight", max_replicas=8, cold_start=60.0)
    result = outcome(simulate(policy, model, history, SLO), model, SLO)
    assert result.slo_attainment >= 0.99
    assert result.peak_replicas == math.ceil(2.5 / knee) == 3
    at_saturation = replace(policy, knee_rate=0.9 * model.capacity)
    assert outcome(simulate(at_saturation, model, history, SLO), model, SLO).tpot_attainment < 0.99


def test_the_forecast_of_a_ramp_is_the_rate_one_horizon_ahead() -> None:
    """On a steady ramp the windowed rate is half a window late; the forecast adds the trend over that
    half window and the horizon, so it reads the rate `horizon` seconds after now."""
    arrivals = [0.01 * k for k in range(600)]  # 0.01 req/s more every second
    arrived = [0.0]
    for a in arrivals:
        arrived.append(arrived[-1] + a)
    now = 400
    assert forecast(arrived, now, 1.0, window=60.0, horizon=75.0) == pytest.approx(
        0.01 * (now + 75), rel=0.02
    )
    flat = [0.0] + [float(k) for k in range(1, 601)]
    assert forecast(flat, now, 1.0, window=60.0, horizon=75.0) == pytest.approx(1.0)


def test_the_anticipating_policy_starts_replicas_before_a_ramp_needs_them() -> None:
    """On a ramp slower than a cold start the forecast asks for replicas one sync plus one cold start
    early, so the SLO holds where the same HPA reading the present rate (no trend) misses it."""
    model = ServiceModel(capacity=1.44, slots=27.0, shape=19.4, ttft_base=0.3, output_tokens=288.0)
    knee = model.knee_rate(SLO.tpot)
    ramp = tuple(0.5 + 4.5 * min(1.0, k / 1200) for k in range(2400))
    history = History(step=1.0, arrivals=ramp)
    base = Policy("base", max_replicas=8, cold_start=60.0, knee_rate=knee)
    (anticipate, _) = anticipating(base, model)
    ahead = outcome(simulate(anticipate, model, history, SLO), model, SLO)
    present = replace(anticipate, forecast=Forecast(horizon=0.0))
    late = outcome(simulate(present, model, history, SLO), model, SLO)
    assert ahead.slo_attainment >= 0.99
    assert late.slo_attainment < ahead.slo_attainment


def test_a_demo_run_on_the_forecast_is_backtested_with_its_guard_per_emulated_second() -> None:
    """The demo's forecast target is per second of its adapter's clock, `time_scale` times slower:
    the backtest divides it back and keeps the HPA's second metric as the guard."""
    settings = {
        "metric": "vllm_request_rate_forecast",
        "target_type": "AverageValue",
        "target": 11.8,
        "time_scale": 10.0,
        "min_replicas": 1,
        "max_replicas": 8,
        "cold_start": 60.0,
        "sync_period": 15.0,
        "tolerance": 0.1,
        "downscale_stabilization": 300.0,
        "hpa_metrics": [
            {"name": "vllm_request_rate_forecast", "target_type": "AverageValue", "target": "11.8"},
            {"name": "vllm_requests_inflight", "target_type": "AverageValue", "target": "12"},
        ],
    }
    policy = demo_policy(settings)
    assert policy.target == pytest.approx(1.18)
    assert policy.forecast == Forecast(horizon=75.0)
    assert policy.guard == Guard("vllm_requests_inflight", "AverageValue", 12.0)


def test_a_demo_run_that_records_its_target_unit_is_backtested_as_recorded() -> None:
    """A demo run that records `target_unit` gives its forecast target per emulated second already:
    the backtest takes it as it is, whatever the run's `time_scale`."""
    settings = {
        "metric": "vllm_request_rate_forecast",
        "target_type": "AverageValue",
        "target": 0.524,
        "target_unit": "req/s",
        "time_scale": 10.0,
        "min_replicas": 1,
        "max_replicas": 8,
        "cold_start": 60.0,
        "sync_period": 15.0,
        "tolerance": 0.1,
        "downscale_stabilization": 120.0,
        "hpa_metrics": [
            {"name": "vllm_request_rate_forecast", "target_type": "AverageValue", "target": "0.524"},
            {"name": "vllm_requests_inflight", "target_type": "AverageValue", "target": "5.4"},
        ],
    }
    policy = demo_policy(settings)
    assert policy.target == pytest.approx(0.524)
    assert policy.guard == Guard("vllm_requests_inflight", "AverageValue", 5.4)
