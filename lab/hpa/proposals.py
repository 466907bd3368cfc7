"""All metrics' proposals of one sync, combined as `computeReplicasForMetrics` in `horizontal.go` does.

The largest proposal wins. A metric that fails is ignored only if the others still propose more
than `spec.replicas`: a missing metric may be hiding demand, so it can never drive a scale-down;
then `ScalingActive` takes the reason of the first failed metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.hpa.replicas import Items, MetricError, Reading, Scale, Tolerances, external_proposal
from lab.hpa.spec import ExternalMetric, HPASpec


@dataclass(frozen=True)
class MetricsOutcome:
    """What the metrics say together."""

    replicas: int | None
    """The largest proposal, or `None` when the metrics cannot
    decide (all failed, or a failure and a scale-down)."""
    proposals: tuple[int | None, ...]
    """Each metric's proposal, `None` where it failed."""
    current: tuple[int | None, ...]
    """Each metric's `status.currentMetrics` value, `None` where failed or not computed by the model."""
    error: str | None = None
    """`invalid metrics (n invalid out of m), first error is: ...` when any metric failed."""
    failure_reason: str | None = None
    """The first failed metric's `ScalingActive` reason (`FailedGetExternalMetric`, ...)."""


def compute_for_metrics(
    spec: HPASpec, scale: Scale, readings: Sequence[Reading | Items], tolerances: Tolerances
) -> MetricsOutcome:
    """One proposal per `spec.all_metrics` entry from its reading, and their combination."""
    proposals: list[int | None] = []
    current: list[int | None] = []
    errors: list[tuple[str, str]] = []
    for metric, reading in zip(spec.all_metrics, readings, strict=True):
        try:
            if isinstance(reading, MetricError):
                raise reading
            if isinstance(metric, ExternalMetric):
                proposal = external_proposal(metric, reading, scale, tolerances)
                proposals.append(proposal.replicas)
                current.append(proposal.current)
            else:
                if not isinstance(reading, int):
                    raise TypeError(
                        f"hpa metric {metric.name!r} of type {metric.type} needs its proposal as an int"
                    )
                proposals.append(reading)
                current.append(None)
        except MetricError as exc:
            proposals.append(None)
            current.append(None)
            if isinstance(metric, ExternalMetric):
                errors.append(
                    (f"failed to get {metric.name} external metric value: {exc}", "FailedGetExternalMetric")
                )
            else:
                errors.append(
                    (f"failed to get {metric.name} {metric.type} metric value: {exc}", metric.failure_reason)
                )
    valid = [p for p in proposals if p is not None]
    replicas = max(valid, default=0)
    if not errors:
        return MetricsOutcome(replicas, tuple(proposals), tuple(current))
    error = f"invalid metrics ({len(errors)} invalid out of {len(readings)}), first error is: {errors[0][0]}"
    if not valid or replicas < scale.spec_replicas:
        return MetricsOutcome(None, tuple(proposals), tuple(current), error, errors[0][1])
    return MetricsOutcome(replicas, tuple(proposals), tuple(current), error)
