"""The bounds: foresight's and the reactive bound's replica schedules (lab/backtest/plans.py)."""

from __future__ import annotations

from dataclasses import replace

from lab.backtest.calibration import ServiceModel
from lab.backtest.plans import foresight_plan
from lab.backtest.policy import Policy

MODEL = ServiceModel(
    capacity=10.0, slots=20.0, shape=20.0, ttft_base=0.02, output_tokens=300.0, kv_per_request=0.04
)
INFLIGHT = Policy("inflight-10", target=10.0, max_replicas=10, cold_start=30.0)


def test_foresight_stays_within_min_and_max() -> None:
    arrivals = [0.0] * 200 + [80.0] * 200
    policy = replace(INFLIGHT, kind="foresight", min_replicas=2, max_replicas=5)
    plan = foresight_plan(policy, MODEL.knee_rate(0.05), arrivals, 1.0)
    assert min(plan) == 2 and max(plan) == 5


def test_the_reactive_bound_asks_only_once_the_rise_has_come_and_holds_it_for_the_window() -> None:
    """Foresight asks a cold start plus a sync before a step; the reactive bound at the step itself
    (from the trailing 10 s), and keeps the replicas for the scale-down window after the load falls."""
    arrivals = [5.0] * 300 + [40.0] * 300 + [5.0] * 600
    policy = replace(INFLIGHT, cold_start=60.0, sync_period=15.0, downscale_stabilization=300.0)
    knee = MODEL.knee_rate(0.05)
    ahead = foresight_plan(policy, knee, arrivals, 1.0)
    present = foresight_plan(policy, knee, arrivals, 1.0, ahead=False)
    low, high = present[0], max(present)
    assert next(i for i, p in enumerate(ahead) if p == high) <= 300 - 60
    assert next(i for i, p in enumerate(present) if p == high) >= 300
    assert present[600 + 299] == high and present[600 + 320] == low
