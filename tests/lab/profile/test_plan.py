"""Step lengths within the budget: full steps while there is time, shrunk ones, then none."""

from __future__ import annotations

import pytest

from lab.profile.plan import (
    LIFETIMES,
    MIN_CLOSED_LIFETIMES,
    MIN_CLOSED_SETTLE_LIFETIMES,
    SETTLE_LIFETIMES,
    Budget,
    BudgetExhausted,
    StepPlan,
    closed_share,
    plan_step,
    size,
)


def test_a_step_holds_lifetimes_or_requests_whichever_is_longer() -> None:
    """Six lifetimes of 2 s at a fast rate; 100 requests at a slow one; settling is 1.5 lifetimes."""
    assert plan_step(2.0, 50.0, 100) == StepPlan(SETTLE_LIFETIMES * 2.0, LIFETIMES * 2.0)
    assert plan_step(2.0, 1.0, 100) == StepPlan(3.0, 100.0)


def test_budget_is_in_the_servers_seconds() -> None:
    """Real seconds left times the time scale."""
    assert Budget(10.0, time_scale=5.0).remaining() == pytest.approx(50.0, rel=0.01)


def test_a_step_shrinks_to_its_share_but_not_below_the_minimum() -> None:
    """With 100 s for 10 steps a 30 s window shrinks to its 10 s share less settling; never below
    three lifetimes or the least requests."""
    budget = Budget(100.0)
    shrunk = budget.fit(StepPlan(1.0, 30.0), e2e=1.0, rate=10.0, steps_left=10, least_requests=30)
    assert shrunk.settle == 1.0 and shrunk.window == pytest.approx(9.0, rel=0.01)
    floor = budget.fit(StepPlan(1.0, 30.0), e2e=1.0, rate=10.0, steps_left=100, least_requests=30)
    assert floor.window == pytest.approx(3.0)


def test_an_exhausted_budget_says_so() -> None:
    with pytest.raises(BudgetExhausted, match="the budget of 1s ran out"):
        Budget(1.0).fit(StepPlan(1.0, 30.0), e2e=1.0, rate=1.0, steps_left=1, least_requests=30)


def test_a_step_fits_only_with_the_knees_repeat_kept_back() -> None:
    """100 s left: a 40 s step fits alone and beside a 40 s repeat (46 s with its margin), not beside
    a 60 s one."""
    budget = Budget(100.0)
    step = StepPlan(4.0, 36.0)
    assert budget.holds(step, None)
    assert budget.holds(step, StepPlan(4.0, 36.0))
    assert not budget.holds(step, StepPlan(6.0, 54.0))


def test_a_closed_loop_level_counts_decode_steps_with_a_floor_of_lifetimes() -> None:
    """Requests of up to 128 tokens keep the calibrated six lifetimes; 256-token ones need half as
    many lifetimes for the same decode steps; 2,048-token ones stop at the floor of two."""
    assert closed_share(128) == 1.0 and closed_share(32) == 1.0
    assert closed_share(256) == pytest.approx(0.5)
    assert closed_share(2048) * LIFETIMES == pytest.approx(MIN_CLOSED_LIFETIMES)


def test_a_closed_loop_level_of_long_requests_is_sized_by_its_share() -> None:
    """Eight clients at 11 s lifetimes: 66 s of 128-token requests after a lifetime and a half of
    settling, 22 s of 2,048-token ones after one lifetime."""
    short = size(Budget(10_000.0), "concurrency", 8, 11.0, 1, output_tokens=128)
    long = size(Budget(10_000.0), "concurrency", 8, 11.0, 1, output_tokens=2048)
    assert short == StepPlan(SETTLE_LIFETIMES * 11.0, LIFETIMES * 11.0)
    assert long.settle == MIN_CLOSED_SETTLE_LIFETIMES * 11.0
    assert long.window == pytest.approx(MIN_CLOSED_LIFETIMES * 11.0)


def test_shrinking_never_lengthens_a_window_below_the_floor() -> None:
    """A planned window shorter than the shrink's floor (three lifetimes) stays as planned."""
    kept = Budget(100.0).fit(StepPlan(1.0, 2.0), e2e=1.0, rate=10.0, steps_left=100, least_requests=6)
    assert kept.window == 2.0
