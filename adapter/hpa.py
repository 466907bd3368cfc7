"""A model of the Kubernetes HPA controller for `External` metrics (autoscaling/v2).

It reproduces what `pkg/controller/podautoscaler` does on every sync of one HorizontalPodAutoscaler:

* `horizontal.go` `reconcileAutoscaler`: scaling is off while the target sits at 0 replicas with
  `minReplicas` > 0; a count outside [min, max] is first brought inside; otherwise metrics decide.
* `horizontal.go` `computeReplicasForMetrics`: the largest proposal over all metrics wins; a metric
  that cannot be fetched is ignored only if the others still propose more than the current count
  (an error can never drive a scale-down).
* `replica_calculator.go` `GetExternalMetricReplicas` (`Value` target): ratio = value / target; inside
  the tolerance keep `spec.replicas`, otherwise ceil(ratio × Ready pods); from 0 replicas ceil(ratio).
  `GetExternalPerPodMetricReplicas` (`AverageValue` target): the tolerance is checked against
  value / (target × `status.replicas`), the proposal is ceil(value / target).
* `horizontal.go` `normalizeDesiredReplicas` (no `behavior`): the highest recommendation of the
  downscale stabilization window, at most max(2 × current, 4), within [min, max].
* `horizontal.go` `normalizeDesiredReplicasWithBehaviors`: stabilization windows over the history of
  unstabilized recommendations, then Pods/Percent policies over past scale events, `selectPolicy`.
* `pkg/apis/autoscaling/v2/defaults.go`: the defaults a partly written `behavior` is completed with.

Times are plain seconds from any monotonic clock the caller chooses, so tests drive it with a fake
clock and the demo with a scaled one. Metric values are milli-units, as the controller reads them
(`Quantity.MilliValue()`), so rounding matches the real controller. Not modelled: Resource, Pods
and Object metrics, CPU initialization periods, and the controller's events and status writes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Final, Literal

PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]
TargetType = Literal["Value", "AverageValue"]

# Go's int32 bounds: the controller caps proposals there instead of overflowing.
_MAX_INT32: Final = 2**31 - 1


class MetricError(Exception):
    """A metric could not be turned into a replica proposal (fetch failed, or no pods to count)."""


def milli_value(quantity: str | float) -> int:
    """`resource.Quantity.MilliValue()`: the value in milli-units, rounded up as Kubernetes does."""
    try:
        number = Decimal(str(quantity)) if isinstance(quantity, int | float) else _decimal(quantity)
    except (InvalidOperation, ValueError) as exc:
        raise ValueError(
            f"quantity {quantity!r} must be a number with an optional SI suffix, e.g. '750m'"
        ) from exc
    return int((number * 1000).to_integral_value(rounding=ROUND_CEILING))


_SUFFIXES: Final = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
}  # fmt: skip


def _decimal(text: str) -> Decimal:
    stripped = text.strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if stripped.endswith(suffix):
            return Decimal(stripped[: -len(suffix)]) * _SUFFIXES[suffix]
    return Decimal(stripped)


@dataclass(frozen=True)
class ScalingPolicy:
    """One `HPAScalingPolicy`: at most `value` pods (or percent) of change per `period_seconds`."""

    type: PolicyType
    value: int
    period_seconds: int


@dataclass(frozen=True)
class ScalingRules:
    """One direction of `behavior` (`HPAScalingRules`); `None` fields take the API defaults."""

    stabilization_window_seconds: int | None = None
    select_policy: SelectPolicy | None = None
    policies: tuple[ScalingPolicy, ...] | None = None
    tolerance: float | None = None
    """Per-direction tolerance (HPAConfigurableTolerance, Kubernetes 1.33+); `None` is the global one."""


@dataclass(frozen=True)
class Behavior:
    """`spec.behavior`: scale-up and scale-down rules."""

    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None


#: `defaults.go` defaultHPAScaleUpRules: no window, the larger of +4 pods and +100 % every 15 s
DEFAULT_SCALE_UP: Final = ScalingRules(
    stabilization_window_seconds=0,
    select_policy="Max",
    policies=(ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)),
)
#: `defaults.go` defaultHPAScaleDownRules: the window comes from the controller flag (300 s by default)
DEFAULT_SCALE_DOWN: Final = ScalingRules(select_policy="Max", policies=(ScalingPolicy("Percent", 100, 15),))


def _complete(rules: ScalingRules | None, defaults: ScalingRules) -> ScalingRules:
    """`copyHPAScalingRules`: every field the user set wins over the default."""
    if rules is None:
        return defaults
    chosen = {f.name: getattr(rules, f.name) for f in fields(rules) if getattr(rules, f.name) is not None}
    return replace(defaults, **chosen)


def with_defaults(behavior: Behavior) -> Behavior:
    """A `behavior` completed as the API server's defaulting does (`SetDefaults_HorizontalPodAutoscalerBehavior`)."""
    return Behavior(
        _complete(behavior.scale_up, DEFAULT_SCALE_UP), _complete(behavior.scale_down, DEFAULT_SCALE_DOWN)
    )


@dataclass(frozen=True)
class ExternalMetric:
    """One `type: External` entry of `spec.metrics`."""

    name: str
    target_type: TargetType
    target: str
    """The target as a quantity (`"24"`, `"800m"`); `value` or `averageValue` per `target_type`."""
    selector: str = ""
    """`metric.selector` as a label selector string (`model_name=llama`)."""

    @property
    def target_milli(self) -> int:
        """The target as the controller reads it (`MilliValue()`)."""
        return milli_value(self.target)


@dataclass(frozen=True)
class HPASpec:
    """The parts of a HorizontalPodAutoscaler spec the controller reads for External metrics."""

    max_replicas: int
    metrics: tuple[ExternalMetric, ...]
    min_replicas: int = 1
    """0 needs the HPAScaleToZero feature gate (and an External or Object metric, which all of these are)."""
    behavior: Behavior | None = None
    """`None` selects the controller's legacy path, as in Kubernetes; a partial one is completed with defaults."""

    def __post_init__(self) -> None:
        if not self.metrics:
            raise ValueError("hpa spec 'metrics' must name at least one external metric")
        if self.min_replicas < 0 or self.max_replicas < max(1, self.min_replicas):
            raise ValueError(
                f"hpa spec replicas min {self.min_replicas} max {self.max_replicas} must satisfy "
                "0 <= minReplicas <= maxReplicas and maxReplicas >= 1"
            )
        for metric in self.metrics:
            if metric.target_milli <= 0:
                raise ValueError(f"hpa metric {metric.name!r} target {metric.target!r} must be positive")
        for rules in (self.behavior.scale_up, self.behavior.scale_down) if self.behavior else ():
            for policy in (rules.policies or ()) if rules else ():
                if policy.value <= 0 or not 0 < policy.period_seconds <= 1800:
                    raise ValueError(
                        f"hpa scaling policy {policy!r} must have value > 0 and 0 < periodSeconds <= 1800"
                    )


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
class Scale:
    """What the controller reads about its target before computing: the `scale` subresource and pods."""

    spec_replicas: int
    """`scale.spec.replicas`: the count last asked for."""
    status_replicas: int
    """`scale.status.replicas`: pods that exist, Ready or not (AverageValue divides by this)."""
    ready_pods: int
    """Pods Running and Ready (Value targets multiply by this)."""


#: a metric's reading: the sum of the returned items' milli-values, or why there is none
Reading = int | MetricError


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


@dataclass(frozen=True)
class _Tolerances:
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


def external_metric_replicas(
    metric: ExternalMetric, usage: int, scale: Scale, tolerances: _Tolerances
) -> int:
    """The proposal of one External metric from its summed milli-value (`replica_calculator.go`)."""
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
        raise MetricError(
            "unable to calculate ready pods: no pods returned by selector while calculating replica count"
        )
    return _int32(math.ceil(ratio * scale.ready_pods))


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

    def _tolerances(self) -> _Tolerances:
        default = self.settings.tolerance
        if self.behavior is None:
            return _Tolerances(default, default)
        up, down = self.behavior.scale_up, self.behavior.scale_down
        return _Tolerances(
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
            limit = max(self._scale_up_limit(now, current, up), current)
            maximum, limited = (
                (limit, "ScaleUpLimit")
                if self.spec.max_replicas > limit
                else (self.spec.max_replicas, "TooManyReplicas")
            )
            if stabilized > maximum:
                return maximum, able, limited
        elif stabilized < current:
            limit = min(self._scale_down_limit(now, current, down), current)
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

    def _scale_up_limit(self, now: float, current: int, rules: ScalingRules) -> int:
        """`calculateScaleUpLimitWithScalingRules`."""
        if rules.select_policy == "Disabled":
            return current
        proposals = []
        for policy in rules.policies or ():
            start = self._period_start(now, current, policy.period_seconds)
            if policy.type == "Pods":
                proposals.append(start + policy.value)
            else:
                # Rounded up, or a small target could never grow by a percentage.
                proposals.append(math.ceil(float(start) * (1 + float(policy.value) / 100)))
        if not proposals:
            return current
        return min(proposals) if rules.select_policy == "Min" else max(proposals)

    def _scale_down_limit(self, now: float, current: int, rules: ScalingRules) -> int:
        """`calculateScaleDownLimitWithBehaviors`: the lowest count the policies allow now."""
        if rules.select_policy == "Disabled":
            return current
        proposals = []
        for policy in rules.policies or ():
            start = self._period_start(now, current, policy.period_seconds)
            if policy.type == "Pods":
                proposals.append(start - policy.value)
            else:
                # Go's int32() truncates, which rounds the number of removed pods up.
                proposals.append(int(float(start) * (1 - float(policy.value) / 100)))
        if not proposals:
            return current
        return max(proposals) if rules.select_policy == "Min" else min(proposals)

    def _store_event(self, now: float, previous: int, new: int) -> None:
        """`storeScaleEvent`: kept only with `behavior`, and only as long as the longest policy period."""
        if self._rules is None or new == previous:
            return
        rules = self._rules[0] if new > previous else self._rules[1]
        events = self._up_events if new > previous else self._down_events
        longest = max((p.period_seconds for p in rules.policies or ()), default=0)
        events[:] = [e for e in events if not e.time < now - longest]
        events.append(_Event(abs(new - previous), now))
