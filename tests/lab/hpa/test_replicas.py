"""One External metric's proposal (`lab.hpa.replicas`) against the documentation and `replica_calculator.go`.

The `Test*` ids port cases of `pkg/controller/podautoscaler/replica_calculator_test.go` with the Go
expectations (replicas and the usage the status shows). Object metric cases are ported onto the
External metric of the same target type: the controller computes both with the same functions
(`getUsageRatioReplicaCount` for Value targets, ceil(usage / target) against `status.replicas` for
AverageValue ones).
"""

from __future__ import annotations

import pytest

from lab.hpa import ExternalMetric, MetricError, Scale, Tolerances, external_proposal
from lab.hpa.replicas import MAX_INT32, MAX_INT64, average_value_sum, per_pod_usage, value_sum
from tests.lab.hpa.harness import average, milli, steady, value

DEFAULT = Tolerances(0.1, 0.1)
UP_1_PERCENT = Tolerances(0.1, 0.01)  # `&Tolerances{defaultTestingTolerance, .01}`: down first, then up


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
        pytest.param(
            value("1"), Scale(0, 0, 0), 1050, 2, id="Value from zero ignores the tolerance: ceil(1.05)"
        ),
        pytest.param(value("1"), Scale(0, 0, 0), 1, 1, id="Value from zero wakes one replica for any value"),
    ],
)
def test_replica_calculator(metric: ExternalMetric, scale: Scale, usage: int, expected: int) -> None:
    """desiredReplicas = ceil[currentReplicas x (currentMetricValue / desiredMetricValue)], skipped within
    tolerance 0.1 ("Algorithm details"). For External metrics replica_calculator.go's
    GetExternalMetricReplicas (Value) multiplies by Ready pods and keeps spec.replicas in tolerance;
    GetExternalPerPodMetricReplicas (AverageValue) checks the tolerance on status.replicas and proposes
    ceil(value / target); at 0 replicas Value proposes ceil(value / target) without tolerance and AverageValue
    ceil(sum / target)."""
    assert external_proposal(metric, usage, scale, DEFAULT).replicas == expected


def test_value_target_without_pods_cannot_count_ready_pods() -> None:
    """getReadyPodsCount fails on an empty pod list: an error, never a proposal of 0."""
    with pytest.raises(MetricError, match="no pods returned by selector"):
        external_proposal(value("1"), 3000, Scale(2, 0, 0), DEFAULT)


# --- ported: replica_calculator_test.go ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("ready", "items", "target", "tolerances", "replicas", "usage"),
    [
        pytest.param(
            (3, 1),
            (8600,),
            4400,
            DEFAULT,
            2,
            8600,
            id="TestReplicaCalcExternalMetric/scale down: ignores unready pods (would otherwise scale up)",
        ),
        pytest.param((5, 5), (8600,), 14334, DEFAULT, 3, 8600, id="TestReplicaCalcExternalMetric/scale down"),
        pytest.param(
            (3, 3),
            (8600,),
            8888,
            DEFAULT,
            3,
            8600,
            id="TestReplicaCalcExternalMetric/within default tolerance",
        ),
        pytest.param(
            (3, 3),
            (8900,),
            8800,
            UP_1_PERCENT,
            4,
            8900,
            id="TestReplicaCalcExternalMetric/outside configurable 1% tolerance",
        ),
        pytest.param(
            (3, 3),
            (MAX_INT64 // 2 + 1, MAX_INT64 // 2 + 1),
            MAX_INT64,
            DEFAULT,
            3,
            MAX_INT64,
            id="TestReplicaCalcExternalMetric/usage overflow caps at MaxInt64",
        ),
        pytest.param((3, 3), (20000,), 15000, DEFAULT, 4, 20000, id="TestReplicaCalcObjectMetric/scale up"),
        pytest.param(
            (3, 3),
            (MAX_INT64,),
            1,
            DEFAULT,
            MAX_INT32,
            MAX_INT64,
            id="TestReplicaCalcObjectMetric/scale up: very large metric saturates replicas to MaxInt32",
        ),
        pytest.param(
            (3, 1),
            (50000,),
            10000,
            DEFAULT,
            5,
            50000,
            id="TestReplicaCalcObjectMetric/scale up: ignores unready pods",
        ),
        pytest.param((5, 5), (12000,), 20000, DEFAULT, 3, 12000, id="TestReplicaCalcObjectMetric/scale down"),
        pytest.param(
            (3, 3),
            (20666,),
            20000,
            DEFAULT,
            3,
            20666,
            id="TestReplicaCalcObjectMetric/within default tolerance",
        ),
        pytest.param(
            (3, 3),
            (20666,),
            20000,
            UP_1_PERCENT,
            4,
            20666,
            id="TestReplicaCalcObjectMetric/outside configurable 1% tolerance",
        ),
    ],
)
def test_ported_value_target(
    ready: tuple[int, int],
    items: tuple[int, ...],
    target: int,
    tolerances: Tolerances,
    replicas: int,
    usage: int,
) -> None:
    """GetExternalMetricReplicas / GetObjectMetricReplicas: `ready` is (pods, Ready pods), all Running."""
    pods, ready_pods = ready
    proposal = external_proposal(milli(target), items, Scale(pods, pods, ready_pods), tolerances)
    assert (proposal.replicas, proposal.current) == (replicas, usage)


@pytest.mark.parametrize(
    ("pods", "items", "target", "tolerances", "replicas", "usage"),
    [
        pytest.param(
            1,
            (MAX_INT64,),
            1,
            DEFAULT,
            MAX_INT32,
            MAX_INT64,
            id="TestReplicaCalcExternalPerPodMetric/replica count overflow saturates to MaxInt32",
        ),
        pytest.param(
            1,
            (MAX_INT64,),
            MAX_INT64,
            DEFAULT,
            1,
            MAX_INT64,
            id=(
                "TestReplicaCalcExternalPerPodMetric/usage overflow with huge target leaves replicas "
                "unchanged"
            ),
        ),
        pytest.param(
            0,
            (20000,),
            5000,
            DEFAULT,
            4,
            0,
            id="TestReplicaCalcExternalPerPodMetric/statusReplicas zero does not overflow usage",
        ),
        pytest.param(
            0,
            (0,),
            5000,
            DEFAULT,
            0,
            0,
            id="TestReplicaCalcExternalPerPodMetric/statusReplicas zero and metric zero does not underflow",
        ),
        pytest.param(3, (8600,), 2150, DEFAULT, 4, 2867, id="TestReplicaCalcExternalPerPodMetric/scale up"),
        pytest.param(5, (8600,), 2867, DEFAULT, 3, 1720, id="TestReplicaCalcExternalPerPodMetric/scale down"),
        pytest.param(
            3,
            (8600,),
            2900,
            DEFAULT,
            3,
            2867,
            id="TestReplicaCalcExternalPerPodMetric/within default tolerance",
        ),
        pytest.param(
            3,
            (8600,),
            2800,
            UP_1_PERCENT,
            4,
            2867,
            id="TestReplicaCalcExternalPerPodMetric/outside configurable 1% tolerance",
        ),
        pytest.param(
            1,
            (MAX_INT64,),
            MAX_INT64,
            DEFAULT,
            1,
            MAX_INT64,
            id="TestReplicaCalcObjectPerPodMetric/usage overflow with huge target leaves replicas unchanged",
        ),
        pytest.param(3, (20000,), 5000, DEFAULT, 4, 6667, id="TestReplicaCalcObjectPerPodMetric/scale up"),
        pytest.param(5, (6000,), 2000, DEFAULT, 3, 1200, id="TestReplicaCalcObjectPerPodMetric/scale down"),
        pytest.param(
            4,
            (20166,),
            5000,
            DEFAULT,
            4,
            5042,
            id="TestReplicaCalcObjectPerPodMetric/within default tolerance",
        ),
        pytest.param(
            4,
            (20208,),
            5000,
            UP_1_PERCENT,
            5,
            5052,
            id="TestReplicaCalcObjectPerPodMetric/outside configurable 1% tolerance",
        ),
        pytest.param(
            0,
            (20000,),
            5000,
            DEFAULT,
            4,
            0,
            id="TestReplicaCalcObjectPerPodMetric/statusReplicas zero does not overflow usage",
        ),
        pytest.param(
            0,
            (0,),
            5000,
            DEFAULT,
            0,
            0,
            id="TestReplicaCalcObjectPerPodMetric/statusReplicas zero and metric zero does not underflow",
        ),
    ],
)
def test_ported_average_value_target(
    pods: int, items: tuple[int, ...], target: int, tolerances: Tolerances, replicas: int, usage: int
) -> None:
    """GetExternalPerPodMetricReplicas / GetObjectPerPodMetricReplicas: status.replicas = `pods`; the usage
    is the per-pod value the status shows."""
    proposal = external_proposal(milli(target, "AverageValue"), items, steady(pods), tolerances)
    assert (proposal.replicas, proposal.current) == (replicas, usage)


@pytest.mark.parametrize(
    ("usage", "pods", "expected"),
    [
        pytest.param(20000, 0, 0, id="TestGetPerPodUsage/zero replicas returns zero"),
        pytest.param(1000, 3, 334, id="TestGetPerPodUsage/normal division with ceiling"),
        pytest.param(MAX_INT64, 1, MAX_INT64, id="TestGetPerPodUsage/overflow returns MaxInt64"),
    ],
)
def test_ported_per_pod_usage(usage: int, pods: int, expected: int) -> None:
    """getPerPodUsage: the AverageValue status value."""
    assert per_pod_usage(usage, pods) == expected


@pytest.mark.parametrize(
    ("items", "by_value", "by_average"),
    [
        pytest.param((1, 2, 3), 6, 6, id="plain sum"),
        pytest.param((MAX_INT64, 1), MAX_INT64, MAX_INT64, id="positive overflow saturates on both paths"),
        pytest.param(
            (-5, 2), -3, MAX_INT64, id="a negative running sum reads as an overflow on the AverageValue path"
        ),
        pytest.param((), 0, 0, id="no items"),
    ],
)
def test_sums_follow_the_controllers_int64_guards(
    items: tuple[int, ...], by_value: int, by_average: int
) -> None:
    """GetExternalMetricReplicas stops before a positive overflow; GetExternalPerPodMetricReplicas adds with
    int64 wrap-around and takes any running sum below 0 for an overflow (so negative items end at
    MaxInt64)."""
    assert (value_sum(items), average_value_sum(items)) == (by_value, by_average)
