"""`reconcileAutoscaler` cases ported from `pkg/controller/podautoscaler/horizontal_test.go`.

Each id is `<Go test>/<subtest>`; the expectations (new replica count, whether the scale is updated,
the status conditions in order) are the Go ones. The harness is the Go one (tests/lab/hpa/harness.py):
one sync, every pod Running and Ready, `HPAScaleToZero` off unless the case turns it on.

Adaptations, named in each case's note: Object metrics become the External metric of the same target
type (the controller computes both with the same replica calculator functions); CPU metrics become
either an External AverageValue metric with the same usage ratio, or, where only their proposal
matters, an `OtherMetric("Resource")` whose reading is the replica count the Go calculator gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from lab.hpa import (
    Behavior,
    Condition,
    ExternalMetric,
    HPASpec,
    MetricError,
    OtherMetric,
    Reading,
    Recommendation,
    ScalingPolicy,
    ScalingRules,
)
from tests.lab.hpa.harness import (
    DISABLED,
    NOT_SCALED_TO_ZERO,
    NOW,
    SCALED_TO_ZERO,
    STATUS_OK,
    cond,
    go_controller,
    milli,
    status_ok_with,
    steady,
)

CPU = OtherMetric("Resource", "cpu")
RESCALED_ONLY = (cond("AbleToScale", True, "SucceededRescale"),)
READY = cond("AbleToScale", True, "ReadyForNewScale")


def value_target(quantity: int) -> ExternalMetric:
    return milli(quantity)


def average_target(quantity: int) -> ExternalMetric:
    return milli(quantity, "AverageValue")


@dataclass(frozen=True)
class Case:
    """One Go case: the HPA, the target's replicas, the metrics' readings, and what must follow."""

    min_replicas: int
    max_replicas: int
    replicas: int
    metrics: tuple[ExternalMetric, ...]
    readings: tuple[Reading, ...]
    desired: int
    conditions: tuple[Condition, ...] | None = None
    """`expectedConditions`; `None` where the Go case does not check them."""
    others: tuple[OtherMetric, ...] = ()
    behavior: Behavior | None = None
    scale_to_zero: bool = False
    configurable_tolerance: bool | None = None
    initial: tuple[Condition, ...] = ()
    recommendations: tuple[Recommendation, ...] | None = None
    note: str = field(default="", compare=False)


NO_HISTORY: tuple[Recommendation, ...] = ()  # `recommendations: []timestampedRecommendation{}`
STZ_UP = (NOT_SCALED_TO_ZERO, RESCALED_ONLY[0], cond("ScalingActive", True, "ValidMetricFound"))
FAILED_EXTERNAL = (
    cond("AbleToScale", True, "SucceededGetScale"),
    cond("ScalingActive", False, "FailedGetExternalMetric"),
)

CASES: dict[str, Case] = {
    "TestScaleUpCMExternal/scale up external metric with value target": Case(
        2, 6, 3, (value_target(6666),), (8600,), 4
    ),
    "TestScaleUpCMExternal/scale up external metric with per-pod average value target": Case(
        2, 6, 3, (average_target(2222),), (8600,), 4
    ),
    "TestScaleUpCMObject/scale up object metric with value target": Case(
        2, 6, 3, (value_target(15000),), (20000,), 4, note="Object -> External Value"
    ),
    "TestScaleUpCMObject/scale up from zero with feature gate enabled": Case(
        0,
        6,
        0,
        (value_target(15000),),
        (20000,),
        2,
        (*STZ_UP, cond("ScalingLimited", False, "DesiredWithinRange")),
        scale_to_zero=True,
        initial=(SCALED_TO_ZERO,),
        note="Object -> External Value",
    ),
    "TestScaleUpCMObject/scale up from zero with feature gate disabled": Case(
        0,
        6,
        0,
        (value_target(15000),),
        (20000,),
        0,
        DISABLED,
        initial=(SCALED_TO_ZERO,),
        note="Object -> External Value",
    ),
    "TestScaleUpCMObject/scale up from zero ignores tolerance with feature gate enabled": Case(
        0,
        6,
        0,
        (value_target(1000),),
        (1000,),
        1,
        (*STZ_UP, cond("ScalingLimited", False, "DesiredWithinRange")),
        scale_to_zero=True,
        initial=(SCALED_TO_ZERO,),
        note="Object -> External Value",
    ),
    "TestScaleUpCMObject/scale up from zero ignores tolerance with feature gate disabled": Case(
        0,
        6,
        0,
        (value_target(1000),),
        (1000,),
        0,
        DISABLED,
        initial=(SCALED_TO_ZERO,),
        note="Object -> External Value",
    ),
    "TestScaleUpCMObject/scale up per-pod object metric with average value target": Case(
        2, 6, 3, (average_target(10000),), (40000,), 4, note="Object -> External AverageValue"
    ),
    "TestScaleDownCM/scale down object metric with value target": Case(
        2,
        6,
        5,
        (value_target(20000),),
        (12000,),
        3,
        recommendations=NO_HISTORY,
        note="Object -> External Value",
    ),
    "TestScaleDownCM/scale down to zero object metric with feature gate enabled": Case(
        0,
        6,
        5,
        (value_target(20000),),
        (0,),
        0,
        status_ok_with(SCALED_TO_ZERO),
        scale_to_zero=True,
        recommendations=NO_HISTORY,
        note="Object -> External Value",
    ),
    "TestScaleDownCM/scale down to zero object metric with feature gate disabled": Case(
        0,
        6,
        5,
        (value_target(20000),),
        (0,),
        0,
        STATUS_OK,
        recommendations=NO_HISTORY,
        note="Object -> External Value",
    ),
    "TestScaleDownCM/scale down per-pod object metric with average value target": Case(
        2,
        6,
        5,
        (average_target(20000),),
        (60000,),
        3,
        recommendations=NO_HISTORY,
        note="Object -> External AverageValue",
    ),
    "TestScaleDownCM/scale down external metric with value target": Case(
        2, 6, 5, (value_target(14400),), (8600,), 3, recommendations=NO_HISTORY
    ),
    "TestScaleDownCM/scale down to zero external metric with feature gate enabled": Case(
        0,
        6,
        5,
        (value_target(14400),),
        (0,),
        0,
        status_ok_with(SCALED_TO_ZERO),
        scale_to_zero=True,
        recommendations=NO_HISTORY,
    ),
    "TestScaleDownCM/scale down to zero external metric with feature gate disabled": Case(
        0, 6, 5, (value_target(14400),), (0,), 0, STATUS_OK, recommendations=NO_HISTORY
    ),
    "TestScaleDownCM/scale down per-pod external metric with average value target": Case(
        2, 6, 5, (average_target(3000),), (8600,), 3, recommendations=NO_HISTORY
    ),
    "TestScaleToZeroBehavior/from zero without condition, FG on": Case(
        0,
        6,
        0,
        (value_target(15000),),
        (20000,),
        0,
        DISABLED,
        scale_to_zero=True,
        note="Object -> External Value",
    ),
    "TestScaleToZeroBehavior/from zero without condition, FG off": Case(
        0, 6, 0, (value_target(15000),), (20000,), 0, DISABLED, note="Object -> External Value"
    ),
    "TestScaleToZeroBehavior/minReplicas increased with ScaledToZero condition, FG on": Case(
        2,
        6,
        0,
        (value_target(15000),),
        (10000,),
        2,
        (*STZ_UP, cond("ScalingLimited", True, "TooFewReplicas")),
        scale_to_zero=True,
        initial=(SCALED_TO_ZERO,),
        note="Object -> External Value",
    ),
    "TestScaleToZeroBehavior/minReplicas increased with ScaledToZero condition, FG off": Case(
        2,
        6,
        0,
        (value_target(15000),),
        (10000,),
        0,
        DISABLED,
        initial=(SCALED_TO_ZERO,),
        note="Object -> External Value",
    ),
    "TestScaleToZeroBehavior/stale ScaledToZero condition cleared on normal rescale, FG on": Case(
        1,
        6,
        3,
        (),
        (5,),
        5,
        (*STZ_UP, cond("ScalingLimited", False, "DesiredWithinRange")),
        others=(CPU,),
        scale_to_zero=True,
        initial=(SCALED_TO_ZERO,),
        note="CPU 50% of 30% on 3 pods proposes 5",
    ),
    "TestScaleToZeroBehavior/stale ScaledToZero condition removed on normal rescale, FG off": Case(
        1, 6, 3, (), (5,), 5, STATUS_OK, others=(CPU,), initial=(SCALED_TO_ZERO,), note="CPU proposes 5"
    ),
    "TestScaleToZeroBehavior/manual scale to zero disables HPA, FG on": Case(
        1,
        6,
        0,
        (),
        (MetricError("no pods"),),
        0,
        DISABLED,
        others=(CPU,),
        scale_to_zero=True,
        note="CPU, never read",
    ),
    "TestScaleToZeroBehavior/manual scale to zero disables HPA, FG off": Case(
        1, 6, 0, (), (MetricError("no pods"),), 0, DISABLED, others=(CPU,), note="CPU, never read"
    ),
    "TestTolerance/object metric with value target within tolerance": Case(
        1, 5, 3, (value_target(20000),), (20050,), 3, status_ok_with(READY), note="Object -> External Value"
    ),
    "TestTolerance/external metric with value target within tolerance": Case(
        2, 6, 4, (value_target(8666),), (8600,), 4, status_ok_with(READY)
    ),
    "TestTolerance/per-pod object metric with average value target within tolerance": Case(
        2,
        6,
        4,
        (average_target(2200),),
        (8600,),
        4,
        status_ok_with(READY),
        note="Object -> External AverageValue",
    ),
    "TestTolerance/per-pod external metric with average value target within tolerance": Case(
        2, 6, 4, (average_target(2200),), (8600,), 4, status_ok_with(READY)
    ),
    "TestConfigurableTolerance/scaling up because of a 1% configurable tolerance": Case(
        1,
        5,
        3,
        (average_target(1000),),
        (3060,),
        4,
        STATUS_OK,
        behavior=Behavior(scale_up=ScalingRules(tolerance=0.01)),
        configurable_tolerance=True,
        note="CPU at 102% of 100% -> AverageValue 3060m over 3 pods of 1",
    ),
    "TestConfigurableTolerance/no scale-down because of a 90% configurable tolerance": Case(
        1,
        5,
        3,
        (average_target(1000),),
        (900,),
        3,
        status_ok_with(READY),
        behavior=Behavior(scale_down=ScalingRules(tolerance=0.9)),
        configurable_tolerance=True,
        note="CPU at 30% of 100% -> AverageValue 900m over 3 pods of 1",
    ),
    "TestConfigurableTolerance/no scaling because of the large default tolerance": Case(
        1,
        5,
        3,
        (average_target(1000),),
        (3060,),
        3,
        status_ok_with(READY),
        configurable_tolerance=True,
        note="CPU at 102% -> AverageValue",
    ),
    (
        "TestConfigurableTolerance/"
        "no scaling because the configurable tolerance is ignored when feature gate is disabled"
    ): Case(
        1,
        5,
        3,
        (average_target(1000),),
        (3060,),
        3,
        status_ok_with(READY),
        behavior=Behavior(scale_up=ScalingRules(tolerance=0.01)),
        configurable_tolerance=False,
        note="CPU at 102% -> AverageValue",
    ),
    "TestReplicaLimits/scale down clamped to min replicas": Case(
        2,
        5,
        3,
        (average_target(900),),
        (115,),
        2,
        status_ok_with(cond("ScalingLimited", True, "TooFewReplicas")),
        recommendations=NO_HISTORY,
        note="CPU proposing 1 -> AverageValue 115m / 900m",
    ),
    "TestReplicaLimits/scale down to zero when min replicas is zero": Case(
        0,
        5,
        3,
        (average_target(900),),
        (0,),
        0,
        STATUS_OK,
        recommendations=NO_HISTORY,
        note="CPU at 0 -> AverageValue 0",
    ),
    "TestReplicaLimits/scale down clamped to min when desired is zero": Case(
        2,
        5,
        3,
        (average_target(900),),
        (0,),
        2,
        status_ok_with(cond("ScalingLimited", True, "TooFewReplicas")),
        recommendations=NO_HISTORY,
        note="CPU at 0 -> AverageValue 0",
    ),
    "TestReplicaLimits/no scaling when spec replicas is zero": Case(
        3, 5, 0, (average_target(900),), (MetricError("never read"),), 0, DISABLED
    ),
    "TestReplicaLimits/scale up to min when below min replicas": Case(
        3, 5, 2, (average_target(900),), (MetricError("never read"),), 3, RESCALED_ONLY
    ),
    "TestReplicaLimits/scale down to max when above max replicas": Case(
        3, 5, 10, (average_target(900),), (MetricError("never read"),), 5, RESCALED_ONLY
    ),
    "TestReplicaLimits/scale up clamped to max replicas": Case(
        2,
        5,
        3,
        (average_target(900),),
        (18500,),
        5,
        status_ok_with(cond("ScalingLimited", True, "TooManyReplicas")),
        note="CPU proposing 21 -> AverageValue 18500m / 900m",
    ),
    "TestUpscaleCap/capped by scale up rules": Case(
        1,
        100,
        3,
        (average_target(1000),),
        (60000,),
        24,
        status_ok_with(cond("ScalingLimited", True, "ScaleUpLimit")),
        behavior=Behavior(scale_up=ScalingRules(0, "Max", (ScalingPolicy("Percent", 700, 60),))),
        note="CPU proposing 60 -> AverageValue 60000m / 1000m",
    ),
    "TestUpscaleCap/capped by max replicas when scale up limit exceeds max": Case(
        1,
        20,
        3,
        (average_target(1000),),
        (60000,),
        20,
        status_ok_with(cond("ScalingLimited", True, "TooManyReplicas")),
        behavior=Behavior(scale_up=ScalingRules(0, "Max", (ScalingPolicy("Percent", 700, 60),))),
        note="CPU proposing 60 -> AverageValue",
    ),
    "TestScaleRCImmediately/scale up to min when below min replicas": Case(
        2, 6, 1, (average_target(1000),), (MetricError("never read"),), 2, RESCALED_ONLY
    ),
    "TestScaleRCImmediately/scale down to max when above max replicas": Case(
        2, 5, 6, (average_target(1000),), (MetricError("never read"),), 5, RESCALED_ONLY
    ),
    "TestScaleTimingBehavior/stabilize downscale": Case(
        1,
        5,
        4,
        (average_target(1000),),
        (2000,),
        4,
        status_ok_with(cond("AbleToScale", True, "ScaleDownStabilized")),
        recommendations=(Recommendation(10, NOW - 600), Recommendation(4, NOW - 60)),
        note="CPU proposing 2 -> AverageValue 2000m / 1000m",
    ),
    "TestConditionFailedGetMetrics/failed get external metric": Case(
        1, 100, 3, (value_target(300),), (MetricError("something went wrong"),), 3, FAILED_EXTERNAL
    ),
    "TestOneMetricEmptyExternalError/scale up when one external metric errors": Case(
        2,
        6,
        3,
        (value_target(100),),
        (MetricError("something went wrong"), 4),
        4,
        others=(CPU,),
        note="CPU proposes 4",
    ),
    "TestOneMetricEmptyExternalError/no scale down when one external metric errors": Case(
        2,
        6,
        5,
        (value_target(1000),),
        (MetricError("something went wrong"), 3),
        5,
        FAILED_EXTERNAL,
        others=(CPU,),
        recommendations=NO_HISTORY,
        note="CPU proposes 3",
    ),
}


@pytest.mark.parametrize("case", [pytest.param(case, id=name) for name, case in CASES.items()])
def test_reconcile(case: Case) -> None:
    """One reconcileAutoscaler: the scale is updated exactly when the count changes, to the Go count, and the
    HPA's conditions read as the Go case expects."""
    spec = HPASpec(
        max_replicas=case.max_replicas,
        min_replicas=case.min_replicas,
        metrics=case.metrics,
        other_metrics=case.others,
        behavior=case.behavior,
    )
    controller = go_controller(
        spec,
        scale_to_zero=case.scale_to_zero,
        configurable_tolerance=case.configurable_tolerance,
        initial=case.initial,
        recommendations=case.recommendations,
    )
    result = controller.sync(NOW, steady(case.replicas), case.readings)
    assert (result.desired_replicas, result.rescale) == (case.desired, case.desired != case.replicas)
    if case.conditions is not None:
        assert result.conditions == case.conditions
