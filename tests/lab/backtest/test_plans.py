"""The bounds: foresight's and the reactive bound's replica schedules (lab/backtest/plans.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from lab.backtest import calibration
from lab.backtest.calibration import ServiceModel
from lab.backtest.plans import foresight_plan
from lab.backtest.policy import Policy, SweepSettings, builtin_sweep, fixed_for_peak
from lab.demo import settings as demo_settings
from lab.sizing import KNEE_SHARE

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


def test_the_fixed_peak_fleet_is_sized_at_the_knee_foresight_sizes_at() -> None:
    """The fixed fleet takes the busiest minute at the knee for the SLO, the per-replica rate foresight
    sizes against, not at saturation (which queues at the peak and misses TPOT there): a peak of
    2.5 req/s is 2 replicas of 1.44 req/s at saturation, 3 at a knee of 1.1."""
    model = ServiceModel(capacity=1.44, slots=16.0)
    settings = SweepSettings(knee_rate=1.1)
    fixed = next(p for p in builtin_sweep(model, settings, peak_rate=2.5) if p.name == "fixed-peak")
    assert fixed.replicas == math.ceil(2.5 / 1.1) == 3 > math.ceil(2.5 / 1.44)
    # Without a knee of its own, the sweep's knee share of capacity, as the anticipating policy's target.
    bare = next(p for p in builtin_sweep(model, SweepSettings(), peak_rate=2.6) if p.name == "fixed-peak")
    assert bare.replicas == math.ceil(2.6 / (KNEE_SHARE * 1.44)) == 3
    assert fixed_for_peak(2.2, 1.1) == 2  # exactly two replicas' worth at the knee


def test_the_knee_share_has_one_definition_for_the_demo_and_the_backtest() -> None:
    """The demo's forecast target and the backtest's knee read the same `lab.sizing.KNEE_SHARE`."""
    assert getattr(calibration, "KNEE_SHARE") is getattr(demo_settings, "KNEE_SHARE") is KNEE_SHARE  # noqa: B009
    assert "KNEE_SHARE: Final" not in Path(calibration.__file__).read_text(encoding="utf-8")
    assert "KNEE_SHARE: Final" not in Path(demo_settings.__file__).read_text(encoding="utf-8")
