"""Headroom as a sweep dimension (`lab.backtest.headroom`): the anticipating policy at lower targets."""

from __future__ import annotations

from lab.backtest.calibration import ServiceModel
from lab.backtest.headroom import HEADROOM_FACTORS, with_headroom
from lab.backtest.policy import FORECAST, SweepSettings, builtin_sweep

MODEL = ServiceModel(capacity=1.44, slots=14.0, shape=25.0, ttft_base=0.13)


def test_each_anticipating_policy_comes_again_at_every_share_of_its_target() -> None:
    """Every forecast policy gets one variant per factor, its target scaled and all else kept; the other
    candidates are untouched and the baselines stay last, so a table reads as the backtest's does."""
    sweep = builtin_sweep(MODEL, SweepSettings(knee_rate=0.72), peak_rate=5.0)
    swept = with_headroom(sweep)
    anticipating = [p for p in sweep if p.metric == FORECAST and p.kind == "hpa"]
    added = [p for p in swept if p not in sweep]
    assert len(added) == len(anticipating) * len(HEADROOM_FACTORS)
    for policy in anticipating:
        for factor in HEADROOM_FACTORS:
            variant = next(p for p in added if p.name == f"{policy.name}-x{factor:g}")
            assert variant.target == round(policy.target * factor, 3) < policy.target
            assert (variant.guard, variant.behavior, variant.forecast) == (
                policy.guard,
                policy.behavior,
                policy.forecast,
            )
    assert {p.name for p in swept} >= {p.name for p in sweep}
    baselines = [p.name for p in sweep if p.baseline]
    assert [p.name for p in swept][-len(baselines) :] == baselines
