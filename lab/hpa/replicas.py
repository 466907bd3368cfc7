"""One External metric's replica proposal, as `pkg/controller/podautoscaler/replica_calculator.go` makes it.

* `GetExternalMetricReplicas` (`Value` target): ratio = value / target; inside the tolerance keep
  `spec.replicas`, otherwise ceil(ratio × Ready pods); at 0 replicas ceil(ratio), no tolerance.
* `GetExternalPerPodMetricReplicas` (`AverageValue` target): the tolerance is checked against
  value / (target × `status.replicas`), the proposal is ceil(value / target) and ignores readiness,
  so at 0 replicas it is ceil(value / target) too.

The value is the sum of the items the metrics API returned, in milli-units, added up as the
controller does in int64 (the two paths guard overflow differently, both end at MaxInt64).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from lab.hpa.spec import ExternalMetric

# Go's integer bounds: the controller caps proposals and sums there instead of overflowing.
MAX_INT32: Final = 2**31 - 1
MAX_INT64: Final = 2**63 - 1


class MetricError(Exception):
    """A metric could not be turned into a replica proposal (fetch failed, or no pods to count)."""


#: a metric's reading: its value in milli-units (the sum of the returned items), or why there is none;
#: for a metric the model does not compute (`OtherMetric`), the int is that metric's replica proposal
Reading = int | MetricError
#: the returned items one by one, for the controller's overflow handling when it sums them
Items = tuple[int, ...]


@dataclass(frozen=True)
class Scale:
    """What the controller reads about its target before computing: the `scale` subresource and pods."""

    spec_replicas: int
    """`scale.spec.replicas`: the count last asked for."""
    status_replicas: int
    """`scale.status.replicas`: pods that exist, Ready or not (AverageValue divides by this)."""
    ready_pods: int
    """Pods Running and Ready (Value targets multiply by this)."""


@dataclass(frozen=True)
class Tolerances:
    """`Tolerances` of replica_calculator.go: the dead band around a ratio of 1 per direction."""

    down: float
    up: float

    def within(self, ratio: float) -> bool:
        """`Tolerances.isWithin`: no change for 1 - down <= ratio <= 1 + up."""
        # NaN (0/0 from zero replicas) compares false, as in Go, so it is never "within".
        return (1.0 - self.down) <= ratio <= (1.0 + self.up)


@dataclass(frozen=True)
class Proposal:
    """One metric's outcome: the replicas it proposes and the value `status.currentMetrics` shows."""

    replicas: int
    current: int
    """milli-units: the summed value for Value targets, the per-pod average for AverageValue ones."""


def _int32(value: float) -> int:
    return MAX_INT32 if value > MAX_INT32 else int(value)


def _wrap64(value: int) -> int:
    """Go int64 addition wraps around."""
    return (value + 2**63) % 2**64 - 2**63


def value_sum(items: Sequence[int]) -> int:
    """`GetExternalMetricReplicas`' sum: stops at MaxInt64 before a positive overflow."""
    usage = 0
    for item in items:
        if item > 0 and usage > MAX_INT64 - item:
            return MAX_INT64
        usage += item
    return usage


def average_value_sum(items: Sequence[int]) -> int:
    """`GetExternalPerPodMetricReplicas`' sum: a running total below 0 (an overflow, or a negative
    item) is taken for an overflow and becomes MaxInt64."""
    usage = 0
    for item in items:
        usage = _wrap64(usage + item)
        if usage < 0:
            return MAX_INT64
    return usage


def per_pod_usage(usage: int, status_replicas: int) -> int:
    """`getPerPodUsage`: ceil(usage / pods), 0 without pods, MaxInt64 once the sum saturated."""
    if float(usage) >= float(MAX_INT64):
        return MAX_INT64
    if status_replicas == 0:
        return 0
    return math.ceil(float(usage) / float(status_replicas))


def _ratio(numerator: float, denominator: float) -> float:
    """Go float64 division: x/0 is ±Inf, 0/0 is NaN (the controller relies on it at zero replicas)."""
    if denominator == 0:
        return math.nan if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / denominator


def external_proposal(
    metric: ExternalMetric, items: int | Sequence[int], scale: Scale, tolerances: Tolerances
) -> Proposal:
    """The proposal of one External metric from the returned items' milli-values; raises `MetricError`
    where the controller cannot count pods (a Value target out of tolerance with no pods at all)."""
    values = (items,) if isinstance(items, int) else items
    target = metric.target_milli
    if metric.target_type == "AverageValue":
        usage = average_value_sum(values)
        # GetExternalPerPodMetricReplicas is handed status.replicas, not spec.replicas.
        replicas = scale.status_replicas
        if not tolerances.within(_ratio(float(usage), float(target) * float(replicas))):
            replicas = _int32(math.ceil(float(usage) / float(target)))
        return Proposal(replicas, per_pod_usage(usage, scale.status_replicas))
    usage = value_sum(values)
    ratio = float(usage) / float(target)
    if scale.spec_replicas == 0:
        # getUsageRatioReplicaCount: from 0 no pods to count and no tolerance, so 0 < ratio <= 1 wakes one.
        return Proposal(_int32(math.ceil(ratio)), usage)
    if tolerances.within(ratio):
        return Proposal(scale.spec_replicas, usage)
    if scale.status_replicas == 0:
        # getReadyPodsCount fails on an empty pod list rather than proposing 0 replicas.
        raise MetricError(
            "unable to calculate ready pods: no pods returned by selector while calculating replica count"
        )
    return Proposal(_int32(math.ceil(ratio * scale.ready_pods)), usage)


def external_metric_replicas(
    metric: ExternalMetric, items: int | Sequence[int], scale: Scale, tolerances: Tolerances
) -> int:
    """Only the replica count of `external_proposal`."""
    return external_proposal(metric, items, scale, tolerances).replicas
