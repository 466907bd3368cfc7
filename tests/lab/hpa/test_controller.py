"""The sync loop (`lab.hpa.controller`) against the Kubernetes documentation and `horizontal.go`.

Doc sections cited are from https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/
("Algorithm details", "Scaling policies", "Stabilization window", "Default Behavior", ...). Cases ported
from horizontal_test.go are in test_controller_go.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from lab.hpa import (
    Behavior,
    ControllerSettings,
    HorizontalController,
    HPASpec,
    MetricError,
    OtherMetric,
    Reading,
    Scale,
    ScalingRules,
)
from tests.lab.hpa.harness import SCALED_TO_ZERO, SYNC, average, changes, run, steady, units, value


def test_several_metrics_take_the_largest_proposal() -> None:
    """Each metric proposes a count and the largest wins ("Scaling on multiple metrics")."""
    spec = HPASpec(max_replicas=20, metrics=(average("10", "a"), average("10", "b"), value("1", "c")))
    result = HorizontalController(spec).sync(0.0, steady(4), [units(20), units(70), units(2)])
    assert result.proposals == (2, 7, 8)
    assert result.desired_replicas == 8
    # the status shows the per-pod average for AverageValue targets and the value for Value ones
    assert result.current_metrics == (units(5), units(17.5), units(2))


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
    result = HorizontalController(spec).sync(0.0, steady(4), readings)
    assert result.desired_replicas == desired
    assert result.scaling_active == active
    assert result.error is not None
    assert result.error.startswith("invalid metrics (")


def test_failed_sync_records_no_recommendation() -> None:
    """A sync whose metrics failed returns before normalization, so it leaves no recommendation that could
    later hold the count up or down (horizontal.go reconcileAutoscaler returns on metricDesiredReplicas ==
    -1)."""
    spec = HPASpec(max_replicas=20, metrics=(average(),), behavior=Behavior(scale_down=ScalingRules(60)))
    controller = HorizontalController(spec)
    controller.sync(0.0, steady(4), [units(4)])
    failed = controller.sync(15.0, steady(4), [MetricError("503")])
    assert failed.able_to_scale == "SucceededGetScale"
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
    result = HorizontalController(spec).sync(0.0, steady(start), [usage])
    assert (result.desired_replicas, result.scaling_limited) == (desired, limited)
    assert result.able_to_scale == "SucceededRescale"


def test_behavior_path_holds_min_replicas() -> None:
    """A scale-down stops at minReplicas whatever the policies allow (horizontal.go
    convertDesiredReplicasWithBehaviorRate: TooFewReplicas)."""
    behavior = Behavior(scale_down=ScalingRules(stabilization_window_seconds=0))
    spec = HPASpec(min_replicas=2, max_replicas=10, metrics=(average(),), behavior=behavior)
    result = HorizontalController(spec).sync(0.0, steady(6), [0])
    assert (result.desired_replicas, result.scaling_limited) == (2, "TooFewReplicas")


@pytest.mark.parametrize(
    ("start", "desired"),
    [pytest.param(15, 10, id="above maxReplicas"), pytest.param(1, 3, id="below minReplicas")],
)
def test_out_of_range_counts_are_corrected_before_metrics(start: int, desired: int) -> None:
    """A current count outside [min, max] is corrected without reading metrics, and ScalingActive is left as
    the previous sync set it (horizontal.go reconcileAutoscaler: "Current number of replicas above
    Spec.MaxReplicas")."""
    spec = HPASpec(min_replicas=3, max_replicas=10, metrics=(average(),))
    controller = HorizontalController(spec)
    controller.sync(0.0, steady(5), [MetricError("adapter answered 503")])
    result = controller.sync(15.0, steady(start), [MetricError("never read")])
    assert (result.desired_replicas, result.proposal, result.rescale) == (desired, None, True)
    assert result.able_to_scale == "SucceededRescale"
    assert result.scaling_active == "FailedGetExternalMetric"


def test_zero_replicas_with_min_above_zero_disables_scaling() -> None:
    """Setting the target to 0 replicas while minReplicas > 0 pauses the HPA ("Implicit maintenance-mode
    deactivation"; horizontal.go: ScalingDisabled)."""
    result = HorizontalController(HPASpec(max_replicas=10, metrics=(average(),))).sync(
        0.0, steady(0), [units(50)]
    )
    assert (result.desired_replicas, result.rescale, result.scaling_active) == (
        0,
        False,
        "ScalingDisabled",
    )


def _load(now: float) -> list[Reading]:
    return [units(100) if 15 <= now < 120 else 0]


@pytest.mark.parametrize(
    ("behavior", "expected"),
    [
        pytest.param(None, [0, 4, 8, 10], id="legacy path: max(2 x current, 4) per sync"),
        pytest.param(Behavior(), [0, 4, 8, 10], id="default behavior: max(4 pods, 100 percent) per 15 s"),
    ],
)
def test_scale_from_zero_and_back(behavior: Behavior | None, expected: list[int]) -> None:
    """An HPA that scaled its workload to 0 (ScaledToZero) still reads its External metric there and
    wakes it when load comes; with no load it returns to 0 after the downscale stabilization window
    (horizontal.go shouldComputeMetricsForZeroReplicas; replica_calculator.go getUsageRatioReplicaCount)."""
    spec = HPASpec(min_replicas=0, max_replicas=10, metrics=(average("10"),), behavior=behavior)
    controller = HorizontalController(spec, conditions=[SCALED_TO_ZERO])
    history = run(controller, 0, _load, until=120 + 300 + 30)
    assert changes(history) == [*expected, 0]
    # the last loaded recommendation (t=105) holds 10 for the 300 s window
    assert history[int(390 / SYNC)] == 10
    assert history[int(420 / SYNC)] == 0
    assert controller.conditions.is_true("ScaledToZero")


def test_a_workload_the_hpa_did_not_scale_to_zero_stays_there() -> None:
    """With minReplicas 0, a workload at 0 without the ScaledToZero condition was put there by someone else:
    the HPA leaves it paused whatever the metric says (KEP-2021; horizontal.go ScalingDisabled)."""
    spec = HPASpec(min_replicas=0, max_replicas=10, metrics=(average("10"),))
    controller = HorizontalController(spec)
    history = run(controller, 0, _load, until=120)
    assert set(history) == {0}
    assert controller.sync(135.0, steady(0), [units(100)]).scaling_active == "ScalingDisabled"


def test_before_1_36_any_workload_at_zero_scales_with_minimum_zero() -> None:
    """Up to 1.35 the controller had no ScaledToZero condition: minReplicas 0 alone made it read metrics at
    0 replicas, whoever set them."""
    spec = HPASpec(min_replicas=0, max_replicas=10, metrics=(average("10"),))
    controller = HorizontalController(
        spec, ControllerSettings(kubernetes_version="1.35", scale_to_zero_gate=True)
    )
    assert changes(run(controller, 0, _load, until=60)) == [0, 4, 8, 10]
    assert controller.conditions.get("ScaledToZero") is None


def test_the_hpa_scales_to_zero_and_remembers_it() -> None:
    """Going from >0 to 0 with minReplicas 0 and an External metric sets ScaledToZero, and the next syncs at
    0 keep computing metrics (ValidMetricFound, not ScalingDisabled)."""
    spec = HPASpec(
        min_replicas=0,
        max_replicas=10,
        metrics=(value("1"),),
        behavior=Behavior(ScalingRules(), ScalingRules(0)),
    )
    controller = HorizontalController(spec)
    first = controller.sync(0.0, steady(3), [0])
    assert (first.desired_replicas, first.scaled_to_zero, first.able_to_scale) == (
        0,
        "ScaledToZero",
        "SucceededRescale",
    )
    idle = controller.sync(15.0, steady(0), [0])
    assert (idle.desired_replicas, idle.scaling_active, idle.proposal) == (0, "ValidMetricFound", 0)
    woken = controller.sync(30.0, steady(0), [units(2.5)])
    assert (woken.desired_replicas, woken.scaled_to_zero) == (3, "NotScaledToZero")


@pytest.mark.parametrize(
    ("behavior", "limited"),
    [
        pytest.param(None, "TooFewReplicas", id="legacy path: the clamp to minReplicas shows"),
        pytest.param(
            Behavior(scale_down=ScalingRules(0)),
            "DesiredWithinRange",
            id="behavior path: the raise to minReplicas comes after the limits, which saw 0 to 0",
        ),
    ],
)
def test_raising_min_replicas_after_an_hpa_driven_zero_scales_to_it(
    behavior: Behavior | None, limited: str
) -> None:
    """minReplicas raised while the HPA holds the workload at 0: metrics are still computed there and it goes
    to the new minimum, even with no load (horizontal.go: "Ensure we scale to at least minReplicas when
    scaling from zero with increased minReplicas")."""
    spec = HPASpec(min_replicas=0, max_replicas=10, metrics=(value("1"),), behavior=behavior)
    controller = HorizontalController(spec, recommendations=[])
    assert controller.sync(0.0, steady(2), [0]).desired_replicas == 0
    controller.spec = replace(spec, min_replicas=2)
    result = controller.sync(15.0, steady(0), [0])
    assert (result.desired_replicas, result.rescale, result.scaled_to_zero) == (
        2,
        True,
        "NotScaledToZero",
    )
    assert (result.proposal, result.scaling_active, result.scaling_limited) == (
        0,
        "ValidMetricFound",
        limited,
    )


def test_without_the_gate_the_hpa_cannot_come_back_from_zero() -> None:
    """1.36 with HPAScaleToZero off: a scale-down to 0 records nothing (the condition is removed), so the
    next sync at 0 disables scaling."""
    spec = HPASpec(
        min_replicas=0, max_replicas=10, metrics=(value("1"),), behavior=Behavior(scale_down=ScalingRules(0))
    )
    controller = HorizontalController(
        spec, ControllerSettings(kubernetes_version="1.36"), conditions=[SCALED_TO_ZERO]
    )
    assert controller.sync(0.0, steady(2), [0]).scaled_to_zero is None
    assert controller.sync(15.0, steady(0), [units(5)]).scaling_active == "ScalingDisabled"


@pytest.mark.parametrize(
    ("version", "proposal"),
    [
        pytest.param("1.34", 20, id="1.34: the field is ignored (gate alpha, off)"),
        pytest.param("1.35", 21, id="1.35: the field applies (beta, on)"),
        pytest.param("1.37", 21, id="1.37: the field applies (stable)"),
    ],
)
def test_per_direction_tolerance_follows_the_version(version: str, proposal: int) -> None:
    """behavior.scaleUp.tolerance replaces the global 0.1 for scale-ups only, when HPAConfigurableTolerance is
    on (replica_calculator.go Tolerances.isWithin; horizontal.go tolerancesForHpa)."""
    strict = Behavior(scale_up=ScalingRules(tolerance=0.0))
    spec = HPASpec(max_replicas=30, metrics=(average("1"),), behavior=strict)
    settings = ControllerSettings(kubernetes_version=version)
    assert HorizontalController(spec, settings).sync(0.0, steady(20), [units(20.5)]).proposal == proposal
    assert HorizontalController(spec, settings).sync(0.0, steady(20), [units(19)]).proposal == 20


def test_tolerance_without_behavior_is_the_flag() -> None:
    """Configurable tolerance lives in `behavior`; without it the flag applies."""
    spec = HPASpec(max_replicas=30, metrics=(average("1"),))
    controller = HorizontalController(spec, ControllerSettings(tolerance=0.0))
    assert controller.sync(0.0, steady(20), [units(20.5)]).proposal == 21


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
    result = HorizontalController(spec).sync(0.0, Scale(2, 0, 0), [usage])
    assert (result.desired_replicas, result.scaling_active) == (desired, active)
    if active == "FailedGetExternalMetric":
        assert result.error is not None and "no pods returned by selector" in result.error


def test_readings_must_match_the_metrics() -> None:
    """One reading per metric of spec.metrics, or the sync refuses."""
    controller = HorizontalController(HPASpec(max_replicas=3, metrics=(average(),)))
    with pytest.raises(ValueError, match="needs 1 readings, got 2"):
        controller.sync(0.0, steady(1), [1, 2])


def test_an_object_metric_also_wakes_a_workload_from_zero() -> None:
    """hasObjectOrExternalMetrics counts Object metrics
    too: an HPA on one alone scales from the zero it set."""
    spec = HPASpec(
        min_replicas=0, max_replicas=10, metrics=(), other_metrics=(OtherMetric("Object", "queue"),)
    )
    result = HorizontalController(spec, conditions=[SCALED_TO_ZERO]).sync(0.0, steady(0), [3])
    assert (result.desired_replicas, result.scaling_active) == (3, "ValidMetricFound")


def test_a_workload_at_zero_reads_its_metrics_items_one_by_one() -> None:
    """Readings may be the returned items; AverageValue sums them as the controller does."""
    spec = HPASpec(min_replicas=0, max_replicas=10, metrics=(average("10"),))
    result = HorizontalController(spec, conditions=[SCALED_TO_ZERO]).sync(
        0.0, steady(0), [(units(12), units(9))]
    )
    assert (result.desired_replicas, result.current_metrics) == (3, (0,))
