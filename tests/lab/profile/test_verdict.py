"""A step's verdict from batch-means intervals: decided only when the window's statistics sit on one side."""

from __future__ import annotations

import math
import random

import pytest

from lab.profile.plan import (
    DECIDE_LIFETIMES,
    DECIDE_REQUESTS,
    Budget,
    BudgetExhausted,
    deciding_step,
    extension,
)
from lab.profile.schema import Estimate
from lab.profile.verdict import (
    MATERIAL_GROWTH,
    Evidence,
    growth_to_decide,
    judge,
    miss_share,
    percentile_interval,
    point_verdict,
    trend,
)


def samples(latencies: list[float], span: float = 80.0) -> list[tuple[float, float]]:
    """Latencies sent evenly over [0, span)."""
    return [(span * i / len(latencies), v) for i, v in enumerate(latencies)]


def evidence(ttft: Estimate | None, slope: Estimate | None = None, completion: float = 1.0) -> Evidence:
    return Evidence(ttft, Estimate(0.0, 0.0, 0.0), slope or Estimate(0.0, -0.01, 0.01), completion, 40.0, 0.1)


def test_misses_spread_evenly_at_three_percent_hold() -> None:
    latencies = [1.0 if i % 33 == 0 else 0.1 for i in range(800)]
    share = miss_share(samples(latencies), 0.5, 0.0, 80.0)
    assert share is not None and share.value == pytest.approx(25 / 800)
    assert share.high < 0.1
    assert judge(evidence(share)) == "held"


def test_the_same_misses_in_one_burst_leave_it_undecided() -> None:
    """A tenth of the requests miss, all in one run (one burst filled the slots): per block that is
    0 or 80 %, so the interval spans the SLO's 10 % and the step must measure longer."""
    latencies = [1.0 if 300 <= i < 380 else 0.1 for i in range(800)]
    share = miss_share(samples(latencies), 0.5, 0.0, 80.0)
    assert share is not None and share.value == pytest.approx(0.1)
    assert share.low < 0.1 < share.high
    assert judge(evidence(share)) == "undecided"


def test_misses_everywhere_fail() -> None:
    rng = random.Random(1)
    latencies = [1.0 if rng.random() < 0.3 else 0.1 for _ in range(800)]
    share = miss_share(samples(latencies), 0.5, 0.0, 80.0)
    assert share is not None and share.low > 0.1
    assert judge(evidence(share)) == "failed"


def test_a_growing_queue_fails_and_a_level_one_holds() -> None:
    rng = random.Random(2)
    growing = trend([(t / 2, 3.0 * t / 2 + rng.gauss(0, 2)) for t in range(160)], 0.0, 80.0)
    level = trend([(t / 2, 10.0 + rng.gauss(0, 2)) for t in range(160)], 0.0, 80.0)
    assert growing is not None and growing.value == pytest.approx(3.0, rel=0.1) and growing.low > 0
    assert judge(evidence(Estimate(0.0, 0.0, 0.0), growing)) == "failed"
    assert level is not None and level.low < 0 < level.high and level.high < MATERIAL_GROWTH * 40
    assert judge(evidence(Estimate(0.0, 0.0, 0.0), level)) == "held"


def test_a_backlog_fails_whatever_the_latencies_say_so_far() -> None:
    assert judge(evidence(Estimate(0.0, 0.0, 0.0), completion=0.85)) == "failed"


def test_at_the_longest_window_the_point_estimates_decide() -> None:
    undecided = evidence(Estimate(0.12, 0.05, 0.2))
    assert judge(undecided) == "undecided" and point_verdict(undecided) == "failed"
    assert point_verdict(evidence(Estimate(0.08, 0.01, 0.2))) == "held"


def test_the_percentile_interval_is_the_spread_of_the_blocks_percentiles() -> None:
    steady = percentile_interval(samples([0.1 + 0.001 * (i % 10) for i in range(800)]), 0.9, 0.0, 80.0)
    assert steady is not None and steady[1] - steady[0] < 1e-9
    bursty = percentile_interval(
        samples([2.0 if 300 <= i < 380 else 0.1 for i in range(800)]), 0.9, 0.0, 80.0
    )
    assert bursty is not None and bursty[0] < 0.5 < bursty[1]
    assert percentile_interval([], 0.9, 0.0, 1.0) is None


def test_the_window_rule_is_requests_or_lifetimes_whichever_is_longer() -> None:
    """On the real engine of the issue (0.65 s lifetimes, 40 req/s) the lifetimes decide: tens of seconds."""
    real = deciding_step(0.65, 40.0)
    assert real.window == pytest.approx(DECIDE_LIFETIMES * 0.65)
    assert 20.0 < real.window < 60.0 and real.settle == pytest.approx(0.1 * real.window)
    fast = deciding_step(0.05, 10.0)
    assert fast.window == pytest.approx(DECIDE_REQUESTS / 10.0)


def test_a_deciding_step_never_shrinks_to_fit_the_budget() -> None:
    budget = Budget(20.0)
    assert budget.require(deciding_step(0.1, 100.0)) == deciding_step(0.1, 100.0)
    with pytest.raises(BudgetExhausted, match="a deciding step of"):
        budget.require(deciding_step(1.0, 10.0))


def test_an_undecided_step_grows_a_deciding_window_at_a_time_up_to_its_limit() -> None:
    """A short scan step first grows to one unit; then a unit at a time up to three. A window that
    is a rounding error short of a unit (`end - settled` of clock readings) grows by a whole unit:
    on the real engine it grew by nothing three times and ended undecided at one unit."""
    unit, limit = 22.0, 66.0
    assert extension(4.0, unit, limit, 1e9) == pytest.approx(18.0)
    assert extension(unit, unit, limit, 1e9) == unit
    assert extension((100.0 + unit) - 100.0 - 1e-12, unit, limit, 1e9) == unit
    assert extension(2 * unit, unit, limit, 1e9) == unit
    assert extension(3 * unit, unit, limit, 1e9) is None
    assert extension(unit, unit, limit, 10.0) is None, "the budget does not hold another unit"
    assert extension(4.0, unit, 0.0, 1e9) is None, "a plain scan step never grows"


def test_the_growth_to_decide_is_the_squared_ratio_of_half_width_to_distance() -> None:
    """A miss share of 0.19 [0.08, 0.30] against 0.10 (a real KV-bound vLLM at 10.69 req/s after
    208 s) needs (0.11 / 0.09)² = 1.5 times the window; decided checks need none; a point on its bound
    never decides."""
    assert growth_to_decide([(Estimate(0.19, 0.08, 0.30), 0.1)]) == pytest.approx((0.11 / 0.09) ** 2)
    assert growth_to_decide([(Estimate(0.05, 0.0, 0.08), 0.1), (None, 0.1)]) == 1.0
    assert growth_to_decide([(Estimate(0.1, 0.05, 0.15), 0.1)]) == math.inf


def test_a_full_window_that_projects_no_decision_within_its_limit_stops() -> None:
    """From a full deciding window on, a step whose statistics project a decision only beyond its
    limit stops (the server flips there); a short scan step still grows to one window first."""
    unit, limit = 60.0, 180.0
    assert extension(unit, unit, limit, 1e9, needed=170.0) == unit
    assert extension(unit, unit, limit, 1e9, needed=316.0) is None
    assert extension(4.0, unit, limit, 1e9, needed=math.inf) == pytest.approx(56.0)
