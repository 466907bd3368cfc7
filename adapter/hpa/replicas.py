"""One External metric's replica proposal, as `pkg/controller/podautoscaler/replica_calculator.go` makes it.

* `GetExternalMetricReplicas` (`Value` target): ratio = value / target; inside the tolerance keep
  `spec.replicas`, otherwise ceil(ratio × Ready pods); from 0 replicas ceil(ratio), no tolerance.
* `GetExternalPerPodMetricReplicas` (`AverageValue` target): the tolerance is checked against
  value / (target × `status.replicas`), the proposal is ceil(value / target) and ignores readiness.

Values are summed milli-values of the returned items, as the controller reads them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from adapter.hpa.spec import ExternalMetric

# Go's int32 bounds: the controller caps proposals there instead of overflowing.
_MAX_INT32: Final = 2**31 - 1


class MetricError(Exception):
    """A metric could not be turned into a replica proposal (fetch failed, or no pods to count)."""


#: a metric's reading: the sum of the returned items' milli-values, or why there is none
Reading = int | MetricError


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


def _int32(value: float) -> int:
    return _MAX_INT32 if value > _MAX_INT32 else int(value)


def _ratio(numerator: float, denominator: float) -> float:
    """Go float64 division: x/0 is ±Inf, 0/0 is NaN (the controller relies on it at zero replicas)."""
    if denominator == 0:
        return math.nan if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / denominator


def external_metric_replicas(metric: ExternalMetric, usage: int, scale: Scale, tolerances: Tolerances) -> int:
    """The proposal of one External metric from its summed milli-value; raises `MetricError` where the
    controller cannot count pods (a Value target out of tolerance with no pods at all)."""
    target = metric.target_milli
    if metric.target_type == "AverageValue":
        # GetExternalPerPodMetricReplicas is handed status.replicas, not spec.replicas.
        ratio = _ratio(usage, target * scale.status_replicas)
        if tolerances.within(ratio):
            return scale.status_replicas
        return _int32(math.ceil(usage / target))
    ratio = usage / target
    if scale.spec_replicas == 0:
        return _int32(math.ceil(ratio))
    if tolerances.within(ratio):
        return scale.spec_replicas
    if scale.status_replicas == 0:
        # getReadyPodsCount fails on an empty pod list rather than proposing 0 replicas.
        raise MetricError(
            "unable to calculate ready pods: no pods returned by selector while calculating replica count"
        )
    return _int32(math.ceil(ratio * scale.ready_pods))
