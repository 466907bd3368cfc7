"""One HPA's sync loop, as `pkg/controller/podautoscaler/horizontal.go` runs it.

* `reconcileAutoscaler`: scaling is off while the target sits at 0 replicas with `minReplicas` > 0;
  a count outside [min, max] is first brought inside; otherwise metrics decide.
* `computeReplicasForMetrics`: the largest proposal over all metrics wins; a metric that cannot be
  fetched is ignored only if the others still propose more than the current count (an error can
  never drive a scale-down).
* `normalizeDesiredReplicas` (no `behavior`): the highest recommendation of the downscale
  stabilization window, at most max(2 × current, 4), within [min, max].
* `normalizeDesiredReplicasWithBehaviors`: stabilization windows over the history of unstabilized
  recommendations, then Pods/Percent policies over past scale events, `selectPolicy`.

Times are plain seconds from any monotonic clock the caller chooses, so tests drive it with a fake
clock and the demo with a scaled one. Not modelled: Resource, Pods and Object metrics, CPU
initialization periods, and the controller's events and status writes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from adapter.hpa.replicas import MetricError, Reading, Scale, Tolerances, external_metric_replicas
from adapter.hpa.spec import HPASpec, ScalingRules, with_defaults


@dataclass(frozen=True)
class ControllerSettings:
    """kube-controller-manager flags of the HPA controller (defaults are Kubernetes')."""

    sync_period: float = 15.0
    """`--horizontal-pod-autoscaler-sync-period` (seconds)."""
    tolerance: float = 0.1
    """`--horizontal-pod-autoscaler-tolerance`: ratios within 1 ± tolerance cause no change."""
    downscale_stabilization: float = 300.0
    """`--horizontal-pod-autoscaler-downscale-stabilization` (seconds)."""


@dataclass(frozen=True)
class Decision:
    """The outcome of one sync, with the condition reasons `kubectl describe hpa` would show."""

    time: float
    current_replicas: int
    desired_replicas: int
    """What `scale.spec.replicas` is set to (equal to current when nothing changes)."""
    proposal: int | None
    """The metrics' proposal before stabilization and limits (`None` when metrics were not used)."""
    proposals: tuple[int | None, ...]
    """Each metric's proposal, `None` where it failed."""
    rescale: bool
    scaling_active: str
    """`ScalingActive` reason: ValidMetricFound, FailedGetExternalMetric or ScalingDisabled."""
    able_to_scale: str = "ReadyForNewScale"
    """`AbleToScale` reason: ReadyForNewScale, ScaleUpStabilized or ScaleDownStabilized."""
    scaling_limited: str = "DesiredWithinRange"
    """`ScalingLimited` reason: DesiredWithinRange, ScaleUpLimit, ScaleDownLimit, TooManyReplicas, TooFewReplicas."""
    error: str | None = None


@dataclass
class _Event:
    change: int
    time: float


class HorizontalController:
    """One HPA's controller state (recommendation history and scale events) and its sync step."""

    def __init__(self, spec: HPASpec, settings: ControllerSettings | None = None) -> None:
        self.spec = spec
        self.settings = settings or ControllerSettings()
        self.behavior = with_defaults(spec.behavior) if spec.behavior is not None else None
        # The completed rules of both directions, or None for the legacy path.
        self._rules: tuple[ScalingRules, ScalingRules] | None = None
        if self.behavior is not None and self.behavior.scale_up and self.behavior.scale_down:
            self._rules = (self.behavior.scale_up, self.behavior.scale_down)
        self._recommendations: list[tuple[int, float]] = []
        self._up_events: list[_Event] = []
        self._down_events: list[_Event] = []

    def _tolerances(self) -> Tolerances:
        default = self.settings.tolerance
        if self.behavior is None:
            return Tolerances(default, default)
        up, down = self.behavior.scale_up, self.behavior.scale_down
        return Tolerances(
            down.tolerance if down and down.tolerance is not None else default,
            up.tolerance if up and up.tolerance is not None else default,
        )

    def sync(self, now: float, scale: Scale, readings: Sequence[Reading]) -> Decision:
        """One `reconcileAutoscaler` pass: `readings` holds one entry per `spec.metrics`, in order."""
        if len(readings) != len(self.spec.metrics):
            raise ValueError(f"hpa sync needs {len(self.spec.metrics)} readings, got {len(readings)}")
        current = scale.spec_replicas
        if not self._recommendations:
            self._recommendations.append((current, now))
        spec = self.spec
        if current == 0 and spec.min_replicas != 0:
            return Decision(now, 0, 0, None, (), False, "ScalingDisabled")
        if current > spec.max_replicas or current < spec.min_replicas:
            desired = spec.max_replicas if current > spec.max_replicas else spec.min_replicas
            self._store_event(now, current, desired)
            return Decision(now, current, desired, None, (), True, "ValidMetricFound")

        proposals, proposal, error = self._compute_for_metrics(scale, readings)
        if proposal is None:
            return Decision(
                now, current, current, None, proposals, False, "FailedGetExternalMetric", error=error
            )
        if self._rules is None:
            desired, able, limited = self._normalize(now, current, proposal)
        else:
            desired, able, limited = self._normalize_with_behavior(now, current, proposal, *self._rules)
        rescale = desired != current
        if rescale:
            self._store_event(now, current, desired)
        return Decision(
            now, current, desired, proposal, proposals, rescale, "ValidMetricFound", able, limited, error
        )

    def _compute_for_metrics(
        self, scale: Scale, readings: Sequence[Reading]
    ) -> tuple[tuple[int | None, ...], int | None, str | None]:
        tolerances = self._tolerances()
        proposals: list[int | None] = []
        errors: list[str] = []
        replicas = 0
        for metric, reading in zip(self.spec.metrics, readings, strict=True):
            try:
                if isinstance(reading, MetricError):
                    raise reading
                proposed = external_metric_replicas(metric, reading, scale, tolerances)
            except MetricError as exc:
                proposals.append(None)
                errors.append(f"failed to get {metric.name} external metric: {exc}")
                continue
            proposals.append(proposed)
            replicas = max(replicas, proposed)
        error = None
        if errors:
            error = (
                f"invalid metrics ({len(errors)} invalid out of {len(readings)}), first error is: {errors[0]}"
            )
        # A failed metric may be hiding demand: only a scale-up may proceed without it.
        if len(errors) == len(readings) or (errors and replicas < scale.spec_replicas):
            return tuple(proposals), None, error
        return tuple(proposals), replicas, error

    def _normalize(self, now: float, current: int, proposal: int) -> tuple[int, str, str]:
        """`normalizeDesiredReplicas`: the legacy path taken when `behavior` is unset."""
        cutoff = now - self.settings.downscale_stabilization
        stabilized = proposal
        kept = []
        for value, at in self._recommendations:
            if at < cutoff:
                continue
            stabilized = max(stabilized, value)
            kept.append((value, at))
        self._recommendations = [*kept, (proposal, now)]
        able = "ScaleDownStabilized" if stabilized != proposal else "ReadyForNewScale"
        # Caps a burst of bogus readings (kubernetes#32304): at most double, or 4, per sync.
        scale_up_limit = max(2 * current, 4)
        maximum = min(self.spec.max_replicas, scale_up_limit)
        if stabilized < self.spec.min_replicas:
            return self.spec.min_replicas, able, "TooFewReplicas"
        if stabilized > maximum:
            limited = "ScaleUpLimit" if self.spec.max_replicas > scale_up_limit else "TooManyReplicas"
            return maximum, able, limited
        return stabilized, able, "DesiredWithinRange"

    def _normalize_with_behavior(
        self, now: float, current: int, proposal: int, up: ScalingRules, down: ScalingRules
    ) -> tuple[int, str, str]:
        """`stabilizeRecommendationWithBehaviors` then `convertDesiredReplicasWithBehaviorRate`."""
        up_window = up.stabilization_window_seconds or 0
        down_window = (
            down.stabilization_window_seconds
            if down.stabilization_window_seconds is not None
            else int(self.settings.downscale_stabilization)
        )
        up_cutoff, down_cutoff = now - up_window, now - down_window
        up_recommendation = down_recommendation = proposal
        for value, at in self._recommendations:
            if at > up_cutoff:
                up_recommendation = min(up_recommendation, value)
            if at > down_cutoff:
                down_recommendation = max(down_recommendation, value)
        # A recommendation older than both windows can never matter again.
        self._recommendations = [
            (v, at) for v, at in self._recommendations if not (at < up_cutoff and at < down_cutoff)
        ]
        self._recommendations.append((proposal, now))
        stabilized = min(max(current, up_recommendation), down_recommendation)
        able = "ReadyForNewScale"
        if stabilized != proposal:
            able = "ScaleUpStabilized" if proposal >= current else "ScaleDownStabilized"

        if stabilized > current:
            limit = max(self._rate_limit(now, current, up, "up"), current)
            maximum, limited = (
                (limit, "ScaleUpLimit")
                if self.spec.max_replicas > limit
                else (self.spec.max_replicas, "TooManyReplicas")
            )
            if stabilized > maximum:
                return maximum, able, limited
        elif stabilized < current:
            limit = min(self._rate_limit(now, current, down, "down"), current)
            minimum, limited = (
                (limit, "ScaleDownLimit")
                if self.spec.min_replicas < limit
                else (self.spec.min_replicas, "TooFewReplicas")
            )
            if stabilized < minimum:
                return minimum, able, limited
        return stabilized, able, "DesiredWithinRange"

    def _period_start(self, now: float, current: int, period: int) -> int:
        """Replicas at the start of a policy period: undo the scale events inside it."""
        cutoff = now - period
        added = sum(e.change for e in self._up_events if e.time > cutoff)
        deleted = sum(e.change for e in self._down_events if e.time > cutoff)
        return current - added + deleted

    def _rate_limit(
        self, now: float, current: int, rules: ScalingRules, direction: Literal["up", "down"]
    ) -> int:
        """The furthest count the policies allow now: `calculateScaleUpLimitWithScalingRules` (up) or
        `calculateScaleDownLimitWithBehaviors` (down)."""
        if rules.select_policy == "Disabled":
            return current
        proposals = []
        for policy in rules.policies or ():
            start = self._period_start(now, current, policy.period_seconds)
            if policy.type == "Pods":
                proposals.append(start + policy.value if direction == "up" else start - policy.value)
            elif direction == "up":
                # Rounded up, or a small target could never grow by a percentage.
                proposals.append(math.ceil(float(start) * (1 + float(policy.value) / 100)))
            else:
                # Go's int32() truncates, which rounds the number of removed pods up.
                proposals.append(int(float(start) * (1 - float(policy.value) / 100)))
        if not proposals:
            return current
        # "Max" is the policy allowing the biggest change: the highest count up, the lowest down.
        biggest_change = max if direction == "up" else min
        smallest_change = min if direction == "up" else max
        return (smallest_change if rules.select_policy == "Min" else biggest_change)(proposals)

    def _store_event(self, now: float, previous: int, new: int) -> None:
        """`storeScaleEvent`: kept only with `behavior`, and only as long as the longest policy period."""
        if self._rules is None or new == previous:
            return
        rules = self._rules[0] if new > previous else self._rules[1]
        events = self._up_events if new > previous else self._down_events
        longest = max((p.period_seconds for p in rules.policies or ()), default=0)
        events[:] = [e for e in events if not e.time < now - longest]
        events.append(_Event(abs(new - previous), now))
