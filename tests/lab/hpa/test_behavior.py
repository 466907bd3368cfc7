"""Stabilization and rate limits (`lab.hpa.behavior`), ported from `horizontal_test.go`.

Every `Test*` id is a case of that file, with its expectations. Times are seconds before `NOW`;
`uniform` places events as `generateEventsUniformDistribution` does.
"""

from __future__ import annotations

import pytest

from lab.hpa import Behavior, ScalingPolicy, ScalingRules, with_defaults
from lab.hpa.behavior import (
    Recommendation,
    ScaleEvent,
    change_in_period,
    convert_with_behavior_rate,
    convert_with_rules,
    rate_limit,
    stabilize,
    stabilize_with_behavior,
    store_scale_event,
)
from tests.lab.hpa.harness import NOW

MIN = 60.0


def rules(pods: int, pods_period: int, percent: int, percent_period: int, window: int) -> ScalingRules:
    """`generateScalingRules`: selectPolicy Max, a Pods and/or a Percent policy, a stabilization window."""
    policies = []
    if pods:
        policies.append(ScalingPolicy("Pods", pods, pods_period))
    if percent:
        policies.append(ScalingPolicy("Percent", percent, percent_period))
    return ScalingRules(window, "Max", tuple(policies) or None)


def uniform(changes: list[int], period: int) -> list[ScaleEvent]:
    """`generateEventsUniformDistribution`: each event in the middle of its slice of the last `period` s
    (whole seconds, as Go's Duration conversion truncates them)."""
    segment = period / len(changes)
    return [
        ScaleEvent(change, NOW - int(period - segment * (index + 1) + segment / 2))
        for index, change in enumerate(changes)
    ]


def recs(*pairs: tuple[int, float]) -> list[Recommendation]:
    """Recommendations (replicas, seconds ago)."""
    return [Recommendation(replicas, NOW - ago) for replicas, ago in pairs]


@pytest.mark.parametrize(
    ("current", "desired", "minimum", "maximum", "expected", "reason"),
    [
        pytest.param(
            5, 7, 3, 8, 7, "DesiredWithinRange", id="TestConvertDesiredReplicasWithRules/within range"
        ),
        pytest.param(
            3, 1, 2, 8, 2, "TooFewReplicas", id="TestConvertDesiredReplicasWithRules/below minReplicas"
        ),
        pytest.param(
            1, 0, 0, 10, 0, "DesiredWithinRange", id="TestConvertDesiredReplicasWithRules/zeroed within range"
        ),
        pytest.param(
            20, 1000, 1, 10, 10, "TooManyReplicas", id="TestConvertDesiredReplicasWithRules/maxReplicas limit"
        ),
        pytest.param(
            3, 1000, 1, 2000, 24, "ScaleUpLimit", id="TestConvertDesiredReplicasWithRules/scaleUpLimit"
        ),
    ],
)
def test_convert_with_rules(
    current: int, desired: int, minimum: int, maximum: int, expected: int, reason: str
) -> None:
    """convertDesiredReplicasWithRules, with the Go tests'
    scaleUpLimitFactor of 8 (calculateScaleUpLimit(3) = 24)."""
    assert convert_with_rules(current, desired, minimum, maximum, factor=8.0) == (expected, reason)


@pytest.mark.parametrize(
    ("log", "proposal", "expected", "length"),
    [
        pytest.param([], 5, 5, 1, id="TestNormalizeDesiredReplicas/empty log"),
        pytest.param(recs((4, 2 * MIN), (5, MIN)), 3, 5, 3, id="TestNormalizeDesiredReplicas/stabilize"),
        pytest.param(recs((1, 2 * MIN), (2, MIN)), 3, 3, 3, id="TestNormalizeDesiredReplicas/no stabilize"),
        pytest.param(
            recs((10, 10 * MIN), (9, 9 * MIN)),
            3,
            3,
            2,
            id="TestNormalizeDesiredReplicas/no stabilize - old recommendations",
        ),
        pytest.param(
            recs((10, 10 * MIN), (4, MIN), (5, 2 * MIN), (9, 9 * MIN)),
            3,
            5,
            4,
            id="TestNormalizeDesiredReplicas/stabilize - old recommendations",
        ),
    ],
)
def test_stabilize_legacy(log: list[Recommendation], proposal: int, expected: int, length: int) -> None:
    """stabilizeRecommendation over a 5 minute window: the highest recent recommendation; a stale entry is
    overwritten by the new one instead of the log growing."""
    assert stabilize(log, NOW, 5 * MIN, proposal) == expected
    assert len(log) == length


@pytest.mark.parametrize(
    ("log", "current", "proposal", "up", "down", "expected", "stored"),
    [
        pytest.param(
            [],
            100,
            5,
            0,
            0,
            5,
            [5],
            id="TestNormalizeDesiredReplicasWithBehavior/empty recommendations for scaling down",
        ),
        pytest.param(
            recs((4, 2 * MIN), (5, MIN)),
            100,
            3,
            0,
            3 * MIN,
            5,
            [4, 5, 3],
            id="TestNormalizeDesiredReplicasWithBehavior/simple scale down stabilization",
        ),
        pytest.param(
            recs((4, 2 * MIN), (5, MIN)),
            1,
            7,
            5 * MIN,
            0,
            4,
            [4, 5, 7],
            id="TestNormalizeDesiredReplicasWithBehavior/simple scale up stabilization",
        ),
        pytest.param(
            recs((1, 2 * MIN), (2, MIN)),
            100,
            3,
            5 * MIN,
            0,
            3,
            [1, 2, 3],
            id="TestNormalizeDesiredReplicasWithBehavior/no scale down stabilization",
        ),
        pytest.param(
            recs((4, 2 * MIN), (5, MIN)),
            1,
            3,
            0,
            5 * MIN,
            3,
            [4, 5, 3],
            id="TestNormalizeDesiredReplicasWithBehavior/no scale up stabilization",
        ),
        pytest.param(
            recs((10, 10 * MIN), (9, 9 * MIN)),
            100,
            3,
            0,
            0,
            3,
            [10, 3],
            id=(
                "TestNormalizeDesiredReplicasWithBehavior/no scale down stabilization, reuse "
                "recommendation element"
            ),
        ),
        pytest.param(
            recs((10, 10 * MIN), (9, 9 * MIN)),
            1,
            100,
            0,
            0,
            100,
            [10, 100],
            id=(
                "TestNormalizeDesiredReplicasWithBehavior/no scale up stabilization, reuse "
                "recommendation element"
            ),
        ),
        pytest.param(
            recs((10, 10 * MIN), (4, MIN), (5, 2 * MIN), (9, 9 * MIN)),
            100,
            3,
            0,
            3 * MIN,
            5,
            [10, 4, 5, 3],
            id=(
                "TestNormalizeDesiredReplicasWithBehavior/scale down stabilization, reuse one of "
                "obsolete recommendation element"
            ),
        ),
        pytest.param(
            recs((10, 100 * MIN), (6, MIN), (5, 2 * MIN), (9, 3 * MIN)),
            1,
            100,
            300,
            0,
            5,
            [100, 6, 5, 9],
            id=(
                "TestNormalizeDesiredReplicasWithBehavior/scale up stabilization, reuse one of obsolete "
                "recommendation element"
            ),
        ),
        pytest.param(
            recs((2, 100 * MIN), (3, 3 * MIN)),
            2,
            1,
            300,
            300,
            2,
            None,
            id=(
                "TestNormalizeDesiredReplicasWithBehavior/scale up and down stabilization, do not scale "
                "up when prenormalized rec goes down"
            ),
        ),
        pytest.param(
            recs((2, 100 * MIN), (1, 3 * MIN)),
            2,
            3,
            300,
            300,
            2,
            None,
            id=(
                "TestNormalizeDesiredReplicasWithBehavior/scale up and down stabilization, do not scale "
                "down when prenormalized rec goes up"
            ),
        ),
    ],
)
def test_stabilize_with_behavior(
    log: list[Recommendation],
    current: int,
    proposal: int,
    up: float,
    down: float,
    expected: int,
    stored: list[int] | None,
) -> None:
    """stabilizeRecommendationWithBehaviors: bounded by the lowest recommendation of the scale-up window and
    the highest of the scale-down window; an entry stale for both windows is reused."""
    stabilized, _ = stabilize_with_behavior(log, NOW, up, down, current, proposal)
    assert stabilized == expected
    if stored is not None:
        assert [r.replicas for r in log] == stored


_UP = "up"
_DOWN = "down"

SCALING_WITH_RULES = [
    # (name, up events, down events, min, max, up rules, down rules, current, desired, expected, reason)
    (
        "prenormalized desired replicas within range",
        None,
        None,
        3,
        8,
        None,
        None,
        5,
        7,
        7,
        "DesiredWithinRange",
    ),
    ("prenormalized desired replicas < minReplicas", None, None, 2, 8, None, None, 3, 1, 2, "TooFewReplicas"),
    (
        "prenormalized desired replicas within range when minReplicas is 0",
        None,
        None,
        0,
        10,
        None,
        None,
        1,
        0,
        0,
        "DesiredWithinRange",
    ),
    (
        "maxReplicas is the limit because maxReplicas < scaleUpLimit",
        None,
        None,
        1,
        10,
        None,
        None,
        20,
        1000,
        10,
        "TooManyReplicas",
    ),
    (
        "desired replica count is more than the maximum replica count",
        None,
        None,
        100,
        150,
        None,
        None,
        100,
        1000,
        150,
        "TooManyReplicas",
    ),
    (
        "scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies",
        None,
        None,
        1,
        2000,
        rules(0, 0, 1, 60, 0),
        None,
        3,
        1000,
        4,
        "ScaleUpLimit",
    ),
    ("scaleUp with default behavior", None, None, 1, 1000, None, None, 10, 50, 20, "ScaleUpLimit"),
    (
        "scaleUp with pods policy larger than percent policy",
        None,
        None,
        1,
        1000,
        rules(100, 60, 100, 60, 0),
        None,
        10,
        500,
        110,
        "ScaleUpLimit",
    ),
    (
        "scaleUp with percent policy larger than pods policy",
        None,
        None,
        1,
        1000,
        rules(2, 60, 100, 60, 0),
        None,
        10,
        500,
        20,
        "ScaleUpLimit",
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large pod policy",
        None,
        None,
        1,
        1000,
        rules(100, 60, 0, 0, 0),
        None,
        10,
        50,
        50,
        "DesiredWithinRange",
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large percent policy",
        None,
        None,
        1,
        1000,
        rules(10000, 60, 0, 0, 0),
        None,
        10,
        50,
        50,
        "DesiredWithinRange",
    ),
    (
        "scaleUp with pod policy limitation",
        None,
        None,
        1,
        1000,
        rules(30, 60, 0, 0, 0),
        None,
        10,
        50,
        40,
        "ScaleUpLimit",
    ),
    (
        "scaleUp with percent policy limitation",
        None,
        None,
        1,
        1000,
        rules(0, 0, 200, 60, 0),
        None,
        10,
        50,
        30,
        "ScaleUpLimit",
    ),
    (
        "scaleDown with percent policy larger than pod policy",
        None,
        None,
        1,
        1000,
        None,
        rules(20, 60, 1, 60, 300),
        100,
        2,
        80,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with pod policy larger than percent policy",
        None,
        None,
        1,
        1000,
        None,
        rules(2, 60, 1, 60, 300),
        100,
        2,
        98,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with spec MinReplicas limitation with large pod policy",
        None,
        None,
        1,
        1000,
        None,
        rules(100, 60, 0, 0, 300),
        10,
        0,
        1,
        "TooFewReplicas",
    ),
    (
        "scaleDown with spec MinReplicas limitation with large percent policy",
        None,
        None,
        5,
        1000,
        None,
        rules(0, 0, 100, 60, 300),
        10,
        2,
        5,
        "TooFewReplicas",
    ),
    (
        "scaleDown with pod policy limitation",
        None,
        None,
        1,
        1000,
        None,
        rules(5, 60, 0, 0, 300),
        10,
        2,
        5,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with percent policy limitation",
        None,
        None,
        1,
        1000,
        None,
        rules(0, 0, 50, 60, 300),
        10,
        5,
        5,
        "DesiredWithinRange",
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large pod policy and events",
        ([1, 5, 9], 120),
        None,
        1,
        200,
        rules(300, 60, 0, 0, 0),
        None,
        100,
        500,
        200,
        "TooManyReplicas",
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large percent policy and events",
        ([1, 5, 9], 120),
        None,
        1,
        200,
        rules(0, 0, 10000, 60, 0),
        None,
        100,
        500,
        200,
        "TooManyReplicas",
    ),
    (
        "scaleUp with currentReplicas limitation with "
        "rate.PeriodSeconds with a lot of recent scale up events",
        ([1, 5, 9], 120),
        None,
        1,
        1000,
        rules(5, 120, 0, 0, 0),
        None,
        100,
        500,
        100,
        "ScaleUpLimit",
    ),
    (
        "scaleUp with pod policy and previous scale up events",
        ([1, 5, 9], 120),
        None,
        1,
        1000,
        rules(150, 120, 0, 0, 0),
        None,
        100,
        500,
        235,
        "ScaleUpLimit",
    ),
    (
        "scaleUp with percent policy and previous scale up events",
        ([1, 5, 9], 120),
        None,
        1,
        1000,
        rules(0, 0, 200, 120, 0),
        None,
        100,
        500,
        255,
        "ScaleUpLimit",
    ),
    (
        "scaleUp with percent policy and previous scale up and down events",
        ([4], 120),
        ([2], 120),
        1,
        1000,
        rules(0, 0, 300, 300, 0),
        None,
        6,
        24,
        16,
        "ScaleUpLimit",
    ),
    (
        "scaleDown with default policy and previous events",
        None,
        ([1, 5, 9], 120),
        1,
        1000,
        None,
        None,
        10,
        5,
        5,
        "DesiredWithinRange",
    ),
    (
        "scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events",
        None,
        ([1, 5, 9], 120),
        1,
        1000,
        None,
        rules(115, 120, 0, 0, 300),
        100,
        0,
        1,
        "TooFewReplicas",
    ),
    (
        "scaleDown with spec MinReplicas limitation with large pod policy and previous events",
        None,
        ([1, 5, 9], 120),
        5,
        1000,
        None,
        rules(130, 120, 0, 0, 300),
        100,
        0,
        5,
        "TooFewReplicas",
    ),
    (
        "scaleDown with spec MinReplicas limitation with large percent policy and previous events",
        None,
        ([1, 5, 9], 120),
        5,
        1000,
        None,
        rules(0, 0, 100, 120, 300),
        100,
        2,
        5,
        "TooFewReplicas",
    ),
    (
        "scaleDown with pod policy limitation and previous events",
        None,
        ([1, 5, 9], 120),
        1,
        1000,
        None,
        rules(5, 120, 0, 0, 300),
        100,
        2,
        100,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with percent policy limitation and previous events",
        None,
        ([2, 4, 6], 120),
        1,
        1000,
        None,
        rules(0, 0, 50, 120, 300),
        100,
        0,
        56,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with percent policy and previous scale up and down events",
        ([2], 120),
        ([4], 120),
        1,
        1000,
        None,
        rules(0, 0, 50, 180, 0),
        10,
        1,
        6,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with previous events preventing further scale down",
        None,
        ([10, 10, 10], 120),
        1,
        1000,
        None,
        rules(0, 0, 10, 120, 300),
        100,
        0,
        100,
        "ScaleDownLimit",
    ),
    (
        "scaleDown with with previous events still allowing more scale down",
        None,
        ([10, 10, 10], 120),
        1,
        1000,
        None,
        rules(0, 0, 1000, 120, 300),
        10,
        5,
        5,
        "DesiredWithinRange",
    ),
    (
        "check 'outdated' flag for events for one behavior for up",
        ([8, 12, 9, 11], 120),
        None,
        1,
        1000,
        rules(1000, 60, 0, 0, 0),
        None,
        100,
        200,
        200,
        "DesiredWithinRange",
    ),
    (
        "check that events were not marked 'outdated' for two different policies in the behavior for up",
        ([8, 12, 9, 11], 120),
        None,
        1,
        1000,
        rules(1000, 120, 100, 60, 0),
        None,
        100,
        200,
        200,
        "DesiredWithinRange",
    ),
    (
        "check that events were marked 'outdated' for two different policies in the behavior for up",
        ([8, 12, 9, 11], 120),
        None,
        1,
        1000,
        rules(1000, 30, 100, 60, 0),
        None,
        100,
        200,
        200,
        "DesiredWithinRange",
    ),
    (
        "check 'outdated' flag for events for one behavior for down",
        None,
        ([8, 12, 9, 11], 120),
        1,
        1000,
        None,
        rules(1000, 60, 0, 0, 300),
        100,
        5,
        5,
        "DesiredWithinRange",
    ),
    (
        "check that events were not marked 'outdated' for two different policies in the behavior for down",
        None,
        ([8, 12, 9, 11], 120),
        1,
        1000,
        None,
        rules(1000, 120, 100, 60, 300),
        100,
        5,
        5,
        "DesiredWithinRange",
    ),
    (
        "check that events were marked 'outdated' for two different policies in the behavior for down",
        None,
        ([8, 12, 9, 11], 120),
        1,
        1000,
        None,
        rules(1000, 30, 100, 60, 300),
        100,
        5,
        5,
        "DesiredWithinRange",
    ),
]


@pytest.mark.parametrize(
    (
        "up_events",
        "down_events",
        "minimum",
        "maximum",
        "up",
        "down",
        "current",
        "desired",
        "expected",
        "reason",
    ),
    [pytest.param(*case[1:], id=f"TestScalingWithRules/{case[0]}") for case in SCALING_WITH_RULES],
)
def test_scaling_with_rules(
    up_events: tuple[list[int], int] | None,
    down_events: tuple[list[int], int] | None,
    minimum: int,
    maximum: int,
    up: ScalingRules | None,
    down: ScalingRules | None,
    current: int,
    desired: int,
    expected: int,
    reason: str,
) -> None:
    """convertDesiredReplicasWithBehaviorRate with rules completed as GenerateHPAScale{Up,Down}Rules does."""
    completed = with_defaults(Behavior(up, down))
    assert completed.scale_up is not None and completed.scale_down is not None
    result = convert_with_behavior_rate(
        current,
        desired,
        minimum,
        maximum,
        completed.scale_up,
        completed.scale_down,
        uniform(*up_events) if up_events else [],
        uniform(*down_events) if down_events else [],
        NOW,
    )
    assert result == (expected, reason)


@pytest.mark.parametrize(
    ("direction", "current", "expected"),
    [
        pytest.param(_UP, 1, 2, id="TestCalculateScaleUpLimitWithScalingRules"),
        pytest.param(_DOWN, 5, 3, id="TestCalculateScaleDownLimitWithBehaviors"),
    ],
)
def test_rate_limit_with_min_select_policy(direction: str, current: int, expected: int) -> None:
    """selectPolicy Min over Pods 2 and Percent 50 per 60 s: the smallest change wins in both directions."""
    rules_ = ScalingRules(300, "Min", (ScalingPolicy("Pods", 2, 60), ScalingPolicy("Percent", 50, 60)))
    assert rate_limit(direction, current, [], [], rules_, NOW) == expected  # type: ignore[arg-type]


STORE_SCALE_EVENTS = [
    # (name, previous (change, seconds ago), rules, stored (change, outdated), change in the last 60 s)
    ("empty entries with default behavior", [], None, [], 0),
    ("empty entries with two-policy-behavior", [], rules(10, 60, 100, 60, 0), [(5, False)], 0),
    ("one outdated entry to be kept untouched without behavior", [(7, 61)], None, [(7, False)], 0),
    (
        "one outdated entry to be replaced with behavior",
        [(7, 61)],
        rules(10, 60, 100, 60, 0),
        [(5, False)],
        0,
    ),
    (
        "one actual entry to be not touched with behavior",
        [(7, 58)],
        rules(10, 60, 100, 60, 0),
        [(7, False), (5, False)],
        7,
    ),
    (
        "two entries, one of them to be replaced",
        [(7, 61), (6, 59)],
        rules(10, 60, 0, 0, 0),
        [(5, False), (6, False)],
        6,
    ),
    (
        "replace one entry, use policies with different periods",
        [(8, 29), (6, 59), (7, 61), (9, 61)],
        rules(10, 60, 100, 30, 0),
        [(8, False), (6, False), (7, True), (5, False)],
        14,
    ),
    (
        "two entries, both actual",
        [(7, 58), (6, 59)],
        rules(10, 120, 100, 30, 0),
        [(7, False), (6, False), (5, False)],
        13,
    ),
]


@pytest.mark.parametrize(
    ("previous", "rules_", "stored", "change"),
    [pytest.param(*case[1:], id=f"TestStoreScaleEvents/{case[0]}") for case in STORE_SCALE_EVENTS],
)
def test_store_scale_events(
    previous: list[tuple[int, float]],
    rules_: ScalingRules | None,
    stored: list[tuple[int, bool]],
    change: int,
) -> None:
    """storeScaleEvent: without behavior nothing is stored; events older than the longest policy period are
    marked outdated and the last of them is overwritten by the new one (a change of 5)."""
    events = [ScaleEvent(c, NOW - ago) for c, ago in previous]
    assert change_in_period(events, 60, NOW) == change
    store_scale_event(events, rules_, NOW, 5)
    assert [(e.change, e.outdated) for e in events] == stored
