"""The demo's default policy (`lab.demo.decision.choice`): the decision lab's recommendation for the demo's
day.

The day is backtested once per module (seconds of CPU): the recommendation must hold the SLO for the
fewest replica-minutes among the supported policies, with foresight below it and the usual choices
(utilisation HPA, fixed peak fleet) above it; `apply` must make it the run's HPA.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lab.demo.capacity import ENGINES, measure_capacity
from lab.demo.decision.choice import (
    FIXED_PEAK,
    FORESIGHT,
    UTILISATION,
    DayBacktest,
    apply,
    backtest_day,
    comparison,
)
from lab.demo.loadgen import SCENARIOS
from lab.demo.settings import DIRECT_METRIC, DemoSettings


@pytest.fixture(scope="module")
def settings() -> DemoSettings:
    return DemoSettings(profile=SCENARIOS["default"], out=Path("unused"))


@pytest.fixture(scope="module")
def day(settings: DemoSettings) -> DayBacktest:
    return backtest_day(settings, measure_capacity(ENGINES["demo"], seed=settings.seed))


def test_the_recommendation_holds_the_slo_for_the_fewest_replica_minutes(day: DayBacktest) -> None:
    """Chosen as `vllm-autoscale backtest` chooses: supported (99 % even at the capacity band's
    pessimistic end), and no supported policy is cheaper."""
    best = day.recommended
    assert best is not None and best.verdict == "supported"
    assert (
        min(best.point.slo_attainment, best.pessimistic.slo_attainment) >= day.decision.rules.slo_attainment
    )
    supported = [j for j in day.decision.judged if j.verdict == "supported"]
    assert all(best.point.gpu_hours <= j.point.gpu_hours for j in supported)


def test_foresight_bounds_it_and_the_usual_choices_cost_more(day: DayBacktest) -> None:
    """Foresight (the traffic known ahead) holds the SLO for no more than the recommendation; the
    utilisation HPA and the fixed peak fleet, the usual choices, cost more on this day."""
    best, bound = day.recommended, day.judged(FORESIGHT)
    assert best is not None
    assert bound.point.slo_attainment >= 0.99
    assert bound.point.replica_minutes <= best.point.replica_minutes
    for name in (UTILISATION, FIXED_PEAK):
        assert day.judged(name).point.replica_minutes > best.point.replica_minutes, name


def test_the_comparison_rows_are_the_days_figures(day: DayBacktest) -> None:
    """The summary's rows are the backtest's own outcomes, and a multiple is over foresight's."""
    rows = comparison(day)
    assert rows.recommended is not None and day.recommended is not None
    assert rows.recommended.name == day.recommended.policy.name
    assert [r.name for r in rows.baselines] == [UTILISATION, FIXED_PEAK]
    assert rows.foresight.replica_minutes == day.judged(FORESIGHT).point.replica_minutes
    fixed = day.judged(FIXED_PEAK).point.replica_minutes
    assert rows.multiple(fixed) == pytest.approx(fixed / rows.foresight.replica_minutes)


def test_apply_makes_the_recommendation_the_runs_hpa(day: DayBacktest, settings: DemoSettings) -> None:
    """The metric, target, guard, replica range and scale-down window come from the policy; a flag
    the user gave wins; a fixed fleet is an HPA whose minimum is its maximum."""
    best = day.recommended
    assert best is not None
    policy = best.policy
    chosen = apply(settings, best)
    assert (chosen.metric_name, chosen.target, chosen.minimum) == (
        policy.metric,
        policy.target,
        policy.min_replicas,
    )
    assert chosen.guard == (None if policy.guard is None else policy.guard.target)
    window = policy.downscale_stabilization
    if policy.behavior is not None and policy.behavior.scale_down is not None:
        window = float(policy.behavior.scale_down.stabilization_window_seconds or window)
    assert chosen.stabilization == window and chosen.policy == policy.name
    mine = apply(dataclasses.replace(settings, target=2.0, min_replicas=3), best)
    assert (mine.target, mine.minimum) == (2.0, 3)
    fixed = apply(settings, day.judged(FIXED_PEAK))
    assert fixed.metric_name == DIRECT_METRIC
    assert fixed.minimum == fixed.max_replicas == day.judged(FIXED_PEAK).policy.replicas
