"""Stabilization windows and scaling policies through the sync loop, against the Kubernetes documentation.

Doc sections cited are from https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/
("Algorithm details", "Scaling policies", "Stabilization window", "Default Behavior"); the functions'
own cases ported from horizontal_test.go are in test_behavior.py.
"""

from __future__ import annotations

import itertools

import pytest

from lab.hpa import (
    Behavior,
    ControllerSettings,
    HorizontalController,
    HPASpec,
    ScalingPolicy,
    ScalingRules,
)
from tests.lab.hpa.harness import average, changes, run, steady, units


def test_legacy_downscale_stabilization_uses_the_highest_recent_recommendation() -> None:
    """Scale-downs use the highest recommendation of the last
    --horizontal-pod-autoscaler-downscale-stabilization (5 minutes by default) ("Algorithm details";
    horizontal.go stabilizeRecommendation)."""
    spec = HPASpec(max_replicas=10, metrics=(average(),))
    controller = HorizontalController(spec)
    proposals = {0.0: 8, 15.0: 6, 30.0: 3}

    history = run(controller, 8, lambda now: [units(proposals.get(now, 2))], until=360)
    assert history[:21] == [8] * 21  # t=0..300: the 8 recommended at t=0 is inside the window
    assert history[21] == 6  # t=315: the t=0 recommendation left the window, t=15's 6 did not
    assert history[22] == 3
    assert history[23] == 2


def test_default_scale_up_rate_is_per_period_not_per_sync() -> None:
    """ "4 pods or a 100% of the currently running replicas will be added every 15 seconds" ("Default
    Behavior"): the pods added within the last periodSeconds count against the policy (horizontal.go
    calculateScaleUpLimitWithScalingRules, periodStartReplicas)."""
    spec = HPASpec(max_replicas=50, metrics=(average(),), behavior=Behavior())
    controller = HorizontalController(spec)
    history = run(controller, 1, lambda _: [units(40)], until=60, period=5.0)
    # t=0: 1 -> max(1+4, 2) = 5; t=5,10: the +4 is still inside the 15 s period;
    # t=15: 5 -> max(9, 10) = 10 ...
    assert history == [5, 5, 5, 10, 10, 10, 20, 20, 20, 40, 40, 40, 40]


def test_scaling_policies_documented_example() -> None:
    """Pods 4 and Percent 10 per 60 s, Max (the default): from 80 to 10 replicas 8 go in the first step, 8 in
    the next (72 x 10% = 7.2 rounds up), and 4 at a time once at 40 or fewer ("Scaling policies";
    horizontal.go calculateScaleDownLimitWithBehaviors truncates 72 x 0.9)."""
    behavior = Behavior(
        scale_down=ScalingRules(
            stabilization_window_seconds=0,
            policies=(ScalingPolicy("Pods", 4, 60), ScalingPolicy("Percent", 10, 60)),
        )
    )
    controller = HorizontalController(HPASpec(max_replicas=100, metrics=(average(),), behavior=behavior))
    history = run(controller, 80, lambda _: [units(10)], until=20 * 60)
    steps = changes([80, *history])
    assert steps[:3] == [80, 72, 64]
    assert [a - b for a, b in itertools.pairwise(steps) if a <= 40] == [4] * 7 + [2]
    assert steps[-1] == 10
    # one step per 60 s period, though the controller syncs every 15 s
    assert history[:5] == [72, 72, 72, 72, 64]


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        pytest.param(100, 95, id="Pods 5 removes fewer than 10 percent"),
        pytest.param(30, 27, id="10 percent removes fewer"),
    ],
)
def test_select_policy_min_picks_the_smallest_change(start: int, expected: int) -> None:
    """selectPolicy Min with Percent 10 and Pods 5 per 60 s removes no more than 5 pods a minute
    ("Example: limit scale down rate")."""
    behavior = Behavior(
        scale_down=ScalingRules(
            stabilization_window_seconds=0,
            select_policy="Min",
            policies=(ScalingPolicy("Percent", 10, 60), ScalingPolicy("Pods", 5, 60)),
        )
    )
    controller = HorizontalController(HPASpec(max_replicas=100, metrics=(average(),), behavior=behavior))
    result = controller.sync(0.0, steady(start), [units(1)])
    assert (result.desired_replicas, result.scaling_limited) == (expected, "ScaleDownLimit")


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        pytest.param(2, 4, id="Percent 100 adds fewer than Pods 4 from 2"),
        pytest.param(10, 14, id="Pods 4 adds fewer than Percent 100 from 10"),
    ],
)
def test_select_policy_min_on_scale_up_picks_the_smallest_increase(start: int, expected: int) -> None:
    """selectPolicy Min on scaleUp applies the policy allowing the least growth (horizontal.go
    calculateScaleUpLimitWithScalingRules: MinChangePolicySelect selects min of the proposals)."""
    behavior = Behavior(scale_up=ScalingRules(select_policy="Min"))
    controller = HorizontalController(HPASpec(max_replicas=100, metrics=(average(),), behavior=behavior))
    result = controller.sync(0.0, steady(start), [units(90)])
    assert (result.desired_replicas, result.scaling_limited) == (expected, "ScaleUpLimit")


@pytest.mark.parametrize(
    ("direction", "start", "usage"),
    [
        pytest.param("down", 6, units(1), id="scale-down disabled"),
        pytest.param("up", 2, units(9), id="scale-up disabled"),
    ],
)
def test_select_policy_disabled_turns_off_one_direction(direction: str, start: int, usage: int) -> None:
    """selectPolicy Disabled turns off scaling in that direction ("Example: disable scale down")."""
    rules = ScalingRules(stabilization_window_seconds=0, select_policy="Disabled")
    behavior = Behavior(scale_down=rules) if direction == "down" else Behavior(scale_up=rules)
    controller = HorizontalController(HPASpec(max_replicas=10, metrics=(average(),), behavior=behavior))
    assert run(controller, start, lambda _: [usage], until=600) == [start] * 41


def test_scale_down_stabilization_window_with_behavior() -> None:
    """ "all desired states from the past 5 minutes will be considered": a scale-down applies the highest
    recommendation of the window ("Stabilization window"; horizontal.go
    stabilizeRecommendationWithBehaviors)."""
    behavior = Behavior(scale_down=ScalingRules(stabilization_window_seconds=300))
    controller = HorizontalController(HPASpec(max_replicas=10, metrics=(average(),), behavior=behavior))
    load = {0.0: 9, 60.0: 5}
    history = run(controller, 9, lambda now: [units(load.get(now, 2))], until=420)
    # the window is open at its start: a recommendation exactly 300 s old no longer counts (time.After)
    assert history[:20] == [9] * 20  # t=0..285: 9 (t=0) is in the window
    assert history[20] == 5  # t=300: 9 left, 5 (t=60) is the highest left
    assert history[24] == 2  # t=360: 5 left the window


def test_scale_down_window_defaults_to_the_controller_flag() -> None:
    """With `behavior` set but no scaleDown window, --horizontal-pod-autoscaler-downscale-stabilization
    applies (horizontal.go maybeInitScaleDownStabilizationWindow)."""
    settings = ControllerSettings(downscale_stabilization=60)
    controller = HorizontalController(
        HPASpec(max_replicas=10, metrics=(average(),), behavior=Behavior()), settings
    )
    history = run(controller, 6, lambda now: [units(6 if now == 0 else 2)], until=90)
    assert history == [6, 6, 6, 6, 2, 2, 2]


def test_scale_up_stabilization_window_uses_the_lowest_recent_recommendation() -> None:
    """A scaleUp stabilization window makes a scale-up wait until every recommendation of the window is
    higher: the lowest one is applied (horizontal.go stabilizeRecommendationWithBehaviors,
    upRecommendation)."""
    behavior = Behavior(scale_up=ScalingRules(stabilization_window_seconds=60))
    controller = HorizontalController(HPASpec(max_replicas=20, metrics=(average(),), behavior=behavior))
    history = run(controller, 2, lambda now: [units(2 if now < 30 else 8)], until=150)
    # the recommendation of 2 at t=15 is inside the 60 s window until t=75 (exclusive)
    assert history[:5] == [2] * 5
    assert history[5] == 6  # t=75: min over the window is 8, limited to 2 + 4 pods in 15 s
    assert history[6] == 8


def test_policies_count_changes_in_the_other_direction() -> None:
    """periodStartReplicas = current - added + deleted within the period, so a scale-down frees room for a
    scale-up in the same period (horizontal.go calculateScaleUpLimitWithScalingRules)."""
    behavior = Behavior(
        scale_up=ScalingRules(policies=(ScalingPolicy("Pods", 2, 60),)),
        scale_down=ScalingRules(stabilization_window_seconds=0, policies=(ScalingPolicy("Pods", 3, 60),)),
    )
    controller = HorizontalController(HPASpec(max_replicas=20, metrics=(average(),), behavior=behavior))
    assert controller.sync(0.0, steady(6), [units(1)]).desired_replicas == 3
    # period start = 3 + 3 deleted = 6, so up to 6 + 2 = 8 in the same minute
    assert controller.sync(15.0, steady(3), [units(10)]).desired_replicas == 8


def test_outdated_scale_events_still_count_for_the_other_direction() -> None:
    """storeScaleEvent only marks events older than its direction's longest policy period outdated and
    overwrites the last of them; the others stay and still count for the other direction's longer periods
    (periodStartReplicas). Scale-downs at t=0, 5 and 25 under a 15 s policy leave the t=0 one in the list,
    so a scale-up at t=30 under a 60 s policy starts from 7 + 2 removed pods: 9 + 2 = 11 (10 if the t=0
    event had been dropped)."""
    behavior = Behavior(
        scale_up=ScalingRules(0, policies=(ScalingPolicy("Pods", 2, 60),)),
        scale_down=ScalingRules(0, policies=(ScalingPolicy("Pods", 5, 15),)),
    )
    spec = HPASpec(max_replicas=30, metrics=(average(),), behavior=behavior)
    controller = HorizontalController(spec, ControllerSettings(tolerance=0.0))
    for now, start, proposal in ((0.0, 10, 9), (5.0, 9, 8), (25.0, 8, 7)):
        assert controller.sync(now, steady(start), [units(proposal)]).desired_replicas == proposal
    assert [(e.change, e.time, e.outdated) for e in controller.scale_down_events] == [
        (1, 0.0, True),
        (1, 25.0, False),
    ]
    assert controller.sync(30.0, steady(7), [units(20)]).desired_replicas == 11


def test_a_new_spec_brings_its_own_behavior() -> None:
    """The completed `behavior` is kept between syncs, and a spec assigned later (a `kubectl apply` of
    the HPA) is read at the next sync: its scale-down window, not the first one's, holds the count."""
    held = HPASpec(max_replicas=10, metrics=(average(),), behavior=Behavior(scale_down=ScalingRules(300)))
    controller = HorizontalController(held)
    first = controller.behavior
    assert first is controller.behavior
    assert first is not None and first.scale_down is not None
    assert first.scale_down.stabilization_window_seconds == 300
    controller.sync(0.0, steady(8), [units(8)])
    assert controller.sync(15.0, steady(8), [units(2)]).desired_replicas == 8
    controller.spec = HPASpec(
        max_replicas=10, metrics=(average(),), behavior=Behavior(scale_down=ScalingRules(0))
    )
    assert controller.sync(30.0, steady(8), [units(2)]).desired_replicas == 2
