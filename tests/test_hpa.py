"""The HPA controller model against the Kubernetes documentation and `pkg/controller/podautoscaler`.

Doc sections cited are from https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/
("Algorithm details", "Scaling policies", "Stabilization window", "Default Behavior", ...); source files are
`pkg/controller/podautoscaler/horizontal.go` and `replica_calculator.go`, and
`pkg/apis/autoscaling/v2/defaults.go`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import pytest

from adapter.hpa import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Behavior,
    ControllerSettings,
    ExternalMetric,
    HorizontalController,
    HPASpec,
    MetricError,
    Reading,
    Scale,
    ScalingPolicy,
    ScalingRules,
    milli_value,
    with_defaults,
)

SYNC = 15.0


def average(target: str = "1", name: str = "vllm_requests_inflight") -> ExternalMetric:
    return ExternalMetric(name, "AverageValue", target)


def value(target: str, name: str = "vllm_kv_cache_usage") -> ExternalMetric:
    return ExternalMetric(name, "Value", target)


def steady(replicas: int) -> Scale:
    """A target whose pods all exist and are Ready."""
    return Scale(replicas, replicas, replicas)


def run(
    controller: HorizontalController,
    start: int,
    reading: Callable[[float], Sequence[Reading]],
    until: float,
    period: float = SYNC,
) -> list[int]:
    """Sync every `period` seconds from t=0 to `until`; pods appear and vanish at once. Returns each sync's desired count."""
    replicas, history, now = start, [], 0.0
    while now <= until:
        replicas = controller.sync(now, steady(replicas), reading(now)).desired_replicas
        history.append(replicas)
        now += period
    return history


def changes(history: Sequence[int]) -> list[int]:
    """The distinct successive replica counts of a run."""
    return [h for i, h in enumerate(history) if i == 0 or h != history[i - 1]]


# With an AverageValue target of 1 the metric's value (in units) is the proposal itself, once out of tolerance.
def units(n: float) -> int:
    return round(n * 1000)


@pytest.mark.parametrize(
    ("metric", "scale", "usage", "expected"),
    [
        pytest.param(value("100m"), steady(3), 200, 6, id="Value 200m over 100m doubles the replicas"),
        pytest.param(value("100m"), steady(4), 50, 2, id="Value 50m over 100m halves the replicas"),
        pytest.param(value("1"), steady(4), 1100, 4, id="Value ratio 1.1 is inside the 0.1 tolerance"),
        pytest.param(
            value("1"), steady(4), 1125, 5, id="Value ratio 1.125 leaves the tolerance: ceil(4 x 1.125)"
        ),
        pytest.param(value("1"), steady(10), 900, 10, id="Value ratio 0.9 is inside the tolerance"),
        pytest.param(value("1"), steady(10), 890, 9, id="Value ratio 0.89 scales down: ceil(8.9)"),
        pytest.param(
            value("10"),
            Scale(4, 4, 2),
            30000,
            6,
            id="Value multiplies the ratio by Ready pods, not by spec replicas",
        ),
        pytest.param(
            average("30"), steady(3), 90000, 3, id="AverageValue 90 over 3 pods at 30 each is on target"
        ),
        pytest.param(
            average("30"), steady(3), 93000, 3, id="AverageValue ratio 1.03 is inside the tolerance"
        ),
        pytest.param(average("30"), steady(3), 100000, 4, id="AverageValue proposes ceil(value / target)"),
        pytest.param(
            average("10"), Scale(4, 4, 1), 30000, 3, id="AverageValue ignores readiness: ceil(30 / 10)"
        ),
        pytest.param(
            average("10"),
            Scale(5, 3, 3),
            31000,
            3,
            id="AverageValue checks tolerance against status.replicas and keeps that count",
        ),
        pytest.param(average("10"), Scale(0, 0, 0), 30000, 3, id="AverageValue from zero replicas"),
        pytest.param(
            average("10"), Scale(0, 0, 0), 0, 0, id="AverageValue from zero with no load stays at zero"
        ),
        pytest.param(
            value("100m"), Scale(0, 0, 0), 250, 3, id="Value from zero replicas proposes ceil(ratio)"
        ),
    ],
)
def test_replica_calculator(metric: ExternalMetric, scale: Scale, usage: int, expected: int) -> None:
    """desiredReplicas = ceil[currentReplicas x (currentMetricValue / desiredMetricValue)], skipped within
    tolerance 0.1 ("Algorithm details"). For External metrics replica_calculator.go's GetExternalMetricReplicas
    (Value) multiplies by Ready pods and keeps spec.replicas in tolerance; GetExternalPerPodMetricReplicas
    (AverageValue) checks the tolerance on status.replicas and proposes ceil(value / target); from 0 replicas
    both propose without tolerance (HPAScaleToZero)."""
    controller = HorizontalController(HPASpec(max_replicas=100, min_replicas=0, metrics=(metric,)))
    assert controller.sync(0.0, scale, [usage]).proposal == expected


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        pytest.param("730m", 730, id="milli suffix"),
        pytest.param("24", 24000, id="plain integer"),
        pytest.param("1.5", 1500, id="decimal"),
        pytest.param("0.0001", 1, id="sub-milli rounds up as MilliValue does"),
        pytest.param("2k", 2_000_000, id="kilo"),
        pytest.param("1Ki", 1_024_000, id="binary suffix"),
        pytest.param(0.8, 800, id="float"),
    ],
)
def test_milli_value(text: str | float, milli: int) -> None:
    """Targets are read with resource.Quantity.MilliValue(), which rounds up to a whole milli-unit."""
    assert milli_value(text) == milli


def test_milli_value_rejects_garbage() -> None:
    """A target that is not a quantity is a spec error, named with an example."""
    with pytest.raises(ValueError, match="must be a number with an optional SI suffix"):
        milli_value("lots")


def test_several_metrics_take_the_largest_proposal() -> None:
    """Each metric proposes a count and the largest wins ("Scaling on multiple metrics")."""
    spec = HPASpec(max_replicas=20, metrics=(average("10", "a"), average("10", "b"), value("1", "c")))
    decision = HorizontalController(spec).sync(0.0, steady(4), [units(20), units(70), units(2)])
    assert decision.proposals == (2, 7, 8)
    assert decision.desired_replicas == 8


@pytest.mark.parametrize(
    ("readings", "desired", "active"),
    [
        pytest.param(
            [MetricError("adapter answered 503"), units(9)],
            8,
            "ValidMetricFound",
            id="failed metric ignored on scale-up",
        ),
        pytest.param(
            [MetricError("adapter answered 503"), units(1)],
            4,
            "FailedGetExternalMetric",
            id="failed metric blocks a scale-down",
        ),
        pytest.param(
            [MetricError("adapter answered 503"), units(4)],
            4,
            "ValidMetricFound",
            id="failed metric with no change",
        ),
        pytest.param(
            [MetricError("timeout"), MetricError("503")],
            4,
            "FailedGetExternalMetric",
            id="all metrics failed",
        ),
    ],
)
def test_missing_metric_never_drives_a_scale_down(readings: list[Reading], desired: int, active: str) -> None:
    """If a metric cannot be computed and the others suggest a scale-down, scaling is skipped; they may still
    scale up ("Algorithm details"; horizontal.go computeReplicasForMetrics: invalidMetricsCount > 0 &&
    replicas < specReplicas)."""
    spec = HPASpec(max_replicas=20, metrics=(average("1", "queue"), average("1", "inflight")))
    decision = HorizontalController(spec).sync(0.0, steady(4), readings)
    assert decision.desired_replicas == desired
    assert decision.scaling_active == active
    assert decision.error is not None
    assert decision.error.startswith("invalid metrics (")


def test_failed_sync_records_no_recommendation() -> None:
    """A sync whose metrics failed returns before normalization, so it leaves no recommendation that could
    later hold the count up or down (horizontal.go reconcileAutoscaler returns on metricDesiredReplicas == -1)."""
    spec = HPASpec(max_replicas=20, metrics=(average(),), behavior=Behavior(scale_down=ScalingRules(60)))
    controller = HorizontalController(spec)
    controller.sync(0.0, steady(4), [units(4)])
    controller.sync(15.0, steady(4), [MetricError("503")])
    assert controller.sync(61.0, steady(4), [units(1)]).desired_replicas == 1


@pytest.mark.parametrize(
    ("min_replicas", "max_replicas", "start", "usage", "desired", "limited"),
    [
        pytest.param(1, 10, 4, units(20), 8, "ScaleUpLimit", id="legacy scale-up limit doubles at most"),
        pytest.param(1, 5, 3, units(20), 5, "TooManyReplicas", id="capped at maxReplicas"),
        pytest.param(1, 10, 1, units(9), 4, "ScaleUpLimit", id="legacy scale-up limit is at least 4"),
    ],
)
def test_legacy_limits(
    min_replicas: int, max_replicas: int, start: int, usage: int, desired: int, limited: str
) -> None:
    """Without `behavior` the count is clamped to [minReplicas, maxReplicas] and a scale-up to
    max(2 x current, 4) per sync (horizontal.go convertDesiredReplicasWithRules, calculateScaleUpLimit)."""
    spec = HPASpec(min_replicas=min_replicas, max_replicas=max_replicas, metrics=(average(),))
    decision = HorizontalController(spec).sync(0.0, steady(start), [usage])
    assert (decision.desired_replicas, decision.scaling_limited) == (desired, limited)


def test_behavior_path_holds_min_replicas() -> None:
    """A scale-down stops at minReplicas whatever the policies allow (horizontal.go
    convertDesiredReplicasWithBehaviorRate: TooFewReplicas)."""
    behavior = Behavior(scale_down=ScalingRules(stabilization_window_seconds=0))
    spec = HPASpec(min_replicas=2, max_replicas=10, metrics=(average(),), behavior=behavior)
    decision = HorizontalController(spec).sync(0.0, steady(6), [0])
    assert (decision.desired_replicas, decision.scaling_limited) == (2, "TooFewReplicas")


@pytest.mark.parametrize(
    ("start", "desired"),
    [pytest.param(15, 10, id="above maxReplicas"), pytest.param(1, 3, id="below minReplicas")],
)
def test_out_of_range_counts_are_corrected_before_metrics(start: int, desired: int) -> None:
    """A current count outside [min, max] is corrected without reading metrics (horizontal.go
    reconcileAutoscaler: "Current number of replicas above Spec.MaxReplicas")."""
    spec = HPASpec(min_replicas=3, max_replicas=10, metrics=(average(),))
    decision = HorizontalController(spec).sync(0.0, steady(start), [MetricError("never read")])
    assert (decision.desired_replicas, decision.proposal, decision.rescale) == (desired, None, True)


def test_zero_replicas_with_min_above_zero_disables_scaling() -> None:
    """Setting the target to 0 replicas while minReplicas > 0 pauses the HPA ("Implicit maintenance-mode
    deactivation"; horizontal.go: ScalingDisabled)."""
    decision = HorizontalController(HPASpec(max_replicas=10, metrics=(average(),))).sync(
        0.0, steady(0), [units(50)]
    )
    assert (decision.desired_replicas, decision.rescale, decision.scaling_active) == (
        0,
        False,
        "ScalingDisabled",
    )


@pytest.mark.parametrize(
    ("behavior", "expected"),
    [
        pytest.param(None, [0, 4, 8, 10], id="legacy path: max(2 x current, 4) per sync"),
        pytest.param(Behavior(), [0, 4, 8, 10], id="default behavior: max(4 pods, 100 percent) per 15 s"),
    ],
)
def test_scale_from_zero_and_back(behavior: Behavior | None, expected: list[int]) -> None:
    """With minReplicas 0 (HPAScaleToZero) External metrics are still evaluated at 0 replicas, and the load
    brings the target up; with no load it returns to 0 after the downscale stabilization window
    (horizontal.go reconcileAutoscaler; replica_calculator.go getUsageRatioReplicaCount)."""
    spec = HPASpec(min_replicas=0, max_replicas=10, metrics=(average("10"),), behavior=behavior)
    controller = HorizontalController(spec)

    def load(now: float) -> list[Reading]:
        return [units(100) if 15 <= now < 120 else 0]

    history = run(controller, 0, load, until=120 + 300 + 30)
    assert changes(history) == [*expected, 0]
    # the last loaded recommendation (t=105) holds 10 for the 300 s window
    assert history[int(390 / SYNC)] == 10
    assert history[int(420 / SYNC)] == 0


def test_legacy_downscale_stabilization_uses_the_highest_recent_recommendation() -> None:
    """Scale-downs use the highest recommendation of the last --horizontal-pod-autoscaler-downscale-stabilization
    (5 minutes by default) ("Algorithm details"; horizontal.go stabilizeRecommendation)."""
    spec = HPASpec(max_replicas=10, metrics=(average(),))
    controller = HorizontalController(spec)
    proposals = {0.0: 8, 15.0: 6, 30.0: 3}

    history = run(controller, 8, lambda now: [units(proposals.get(now, 2))], until=360)
    assert history[:21] == [8] * 21  # t=0..300: the 8 recommended at t=0 is inside the window
    assert history[21] == 6  # t=315: the t=0 recommendation left the window, t=15's 6 did not
    assert history[22] == 3
    assert history[23] == 2


def test_default_behavior_matches_the_documented_defaults() -> None:
    """Unset fields of `behavior` take the documented defaults: scaleUp no window, Pods 4 and Percent 100 per
    15 s, Max; scaleDown Percent 100 per 15 s, window from the controller flag ("Default Behavior";
    defaults.go)."""
    completed = with_defaults(Behavior(scale_down=ScalingRules(stabilization_window_seconds=60)))
    assert completed.scale_up == DEFAULT_SCALE_UP
    assert completed.scale_up.policies == (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15))
    assert completed.scale_down == ScalingRules(60, "Max", DEFAULT_SCALE_DOWN.policies)


def test_default_scale_up_rate_is_per_period_not_per_sync() -> None:
    """ "4 pods or a 100% of the currently running replicas will be added every 15 seconds" ("Default Behavior"):
    the pods added within the last periodSeconds count against the policy (horizontal.go
    calculateScaleUpLimitWithScalingRules, periodStartReplicas)."""
    spec = HPASpec(max_replicas=50, metrics=(average(),), behavior=Behavior())
    controller = HorizontalController(spec)
    history = run(controller, 1, lambda _: [units(40)], until=60, period=5.0)
    # t=0: 1 -> max(1+4, 2) = 5; t=5,10: the +4 is still inside the 15 s period; t=15: 5 -> max(9, 10) = 10 ...
    assert history == [5, 5, 5, 10, 10, 10, 20, 20, 20, 40, 40, 40, 40]


def test_scaling_policies_documented_example() -> None:
    """Pods 4 and Percent 10 per 60 s, Max (the default): from 80 to 10 replicas 8 go in the first step, 8 in
    the next (72 x 10% = 7.2 rounds up), and 4 at a time once at 40 or fewer ("Scaling policies"; horizontal.go
    calculateScaleDownLimitWithBehaviors truncates 72 x 0.9)."""
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
    decision = controller.sync(0.0, steady(start), [units(1)])
    assert (decision.desired_replicas, decision.scaling_limited) == (expected, "ScaleDownLimit")


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
    decision = controller.sync(0.0, steady(start), [units(90)])
    assert (decision.desired_replicas, decision.scaling_limited) == (expected, "ScaleUpLimit")


@pytest.mark.parametrize(
    ("usage", "desired", "active"),
    [
        pytest.param(
            3000, 2, "FailedGetExternalMetric", id="out of tolerance: pods must be counted and none exist"
        ),
        pytest.param(1050, 2, "ValidMetricFound", id="inside the tolerance: no pods need counting"),
    ],
)
def test_value_target_without_pods_is_an_error_not_a_scale_down(
    usage: int, desired: int, active: str
) -> None:
    """A Value target multiplies by the Ready pods, and an empty pod list is an error
    (replica_calculator.go getReadyPodsCount: "no pods returned by selector while calculating replica
    count"), so the count is kept rather than driven to 0; inside the tolerance spec.replicas is kept
    before pods are listed."""
    spec = HPASpec(max_replicas=10, metrics=(value("1"),))
    decision = HorizontalController(spec).sync(0.0, Scale(2, 0, 0), [usage])
    assert (decision.desired_replicas, decision.scaling_active) == (desired, active)
    if active == "FailedGetExternalMetric":
        assert decision.error is not None and "no pods returned by selector" in decision.error


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
    recommendation of the window ("Stabilization window"; horizontal.go stabilizeRecommendationWithBehaviors)."""
    behavior = Behavior(scale_down=ScalingRules(stabilization_window_seconds=300))
    controller = HorizontalController(HPASpec(max_replicas=10, metrics=(average(),), behavior=behavior))
    load = {0.0: 9, 60.0: 5}
    history = run(controller, 9, lambda now: [units(load.get(now, 2))], until=420)
    # the window is open at its start: a recommendation exactly 300 s old no longer counts (time.After)
    assert history[:20] == [9] * 20  # t=0..285: 9 (t=0) is in the window
    assert history[20] == 5  # t=300: 9 left, 5 (t=60) is the highest left
    assert history[24] == 2  # t=360: 5 left the window


def test_scale_down_window_defaults_to_the_controller_flag() -> None:
    """With `behavior` set but no scaleDown window, --horizontal-pod-autoscaler-downscale-stabilization applies
    (horizontal.go maybeInitScaleDownStabilizationWindow)."""
    settings = ControllerSettings(downscale_stabilization=60)
    controller = HorizontalController(
        HPASpec(max_replicas=10, metrics=(average(),), behavior=Behavior()), settings
    )
    history = run(controller, 6, lambda now: [units(6 if now == 0 else 2)], until=90)
    assert history == [6, 6, 6, 6, 2, 2, 2]


def test_scale_up_stabilization_window_uses_the_lowest_recent_recommendation() -> None:
    """A scaleUp stabilization window makes a scale-up wait until every recommendation of the window is
    higher: the lowest one is applied (horizontal.go stabilizeRecommendationWithBehaviors, upRecommendation)."""
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


def test_per_direction_tolerance() -> None:
    """behavior.scaleUp.tolerance replaces the global 0.1 for scale-ups only (HPAConfigurableTolerance,
    Kubernetes 1.33; replica_calculator.go Tolerances.isWithin)."""
    strict = Behavior(scale_up=ScalingRules(tolerance=0.0))
    spec = HPASpec(max_replicas=20, metrics=(average("1"),), behavior=strict)
    assert HorizontalController(spec).sync(0.0, steady(20), [units(20.5)]).proposal == 21
    assert HorizontalController(spec).sync(0.0, steady(20), [units(19)]).proposal == 20


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"max_replicas": 3, "metrics": ()}, "at least one external metric", id="no metrics"),
        pytest.param(
            {"max_replicas": 2, "min_replicas": 3, "metrics": (average(),)},
            "minReplicas <= maxReplicas",
            id="min above max",
        ),
        pytest.param(
            {"max_replicas": 0, "min_replicas": 0, "metrics": (average(),)}, "maxReplicas >= 1", id="max zero"
        ),
        pytest.param({"max_replicas": 3, "metrics": (average("0"),)}, "must be positive", id="zero target"),
        pytest.param(
            {
                "max_replicas": 3,
                "metrics": (average(),),
                "behavior": Behavior(scale_up=ScalingRules(policies=(ScalingPolicy("Pods", 1, 3600),))),
            },
            "periodSeconds <= 1800",
            id="policy period too long",
        ),
        pytest.param(
            {
                "max_replicas": 3,
                "metrics": (average(),),
                "behavior": Behavior(scale_down=ScalingRules(policies=())),
            },
            "must specify at least one policy",
            id="empty policy list",
        ),
    ],
)
def test_spec_validation(kwargs: dict[str, object], message: str) -> None:
    """Specs the API server would reject are rejected with the rule they break."""
    with pytest.raises(ValueError, match=message):
        HPASpec(**kwargs)  # type: ignore[arg-type]
