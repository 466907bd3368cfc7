"""One HPA's sync loop, as `pkg/controller/podautoscaler/horizontal.go` runs it (`reconcileAutoscaler`).

1. `AbleToScale` reads `SucceededGetScale`; the first sync records the current count as a recommendation.
2. At 0 replicas: from 1.36, metrics are computed only if the HPA scaled the workload to 0 itself
   (`ScaledToZero` condition, gate on) and it has an Object/External metric, or `minReplicas` was
   raised since; otherwise scaling is disabled (`ScalingDisabled`). Before 1.36, only `minReplicas: 0`.
3. A count above `maxReplicas` or below `minReplicas` is corrected without reading metrics, and
   without touching `ScalingActive`.
4. Otherwise the metrics decide (`computeReplicasForMetrics`: the largest proposal; a failed metric
   only lets a scale-up through), then stabilization and limits (`lab.hpa.behavior`).
5. A rescale sets `AbleToScale` to `SucceededRescale`, records a scale event (with `behavior`), and
   from 1.36 sets `ScaledToZero` (True only when the HPA itself went from >0 to 0) or, gate off,
   removes it.

Times are plain seconds from any monotonic clock the caller chooses, so tests drive it with a fake
clock and the demo with a scaled one. Not modelled: CPU initialization periods, events, selector
checks, and failed scale updates (every rescale succeeds).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lab.hpa.behavior import (
    Recommendation,
    ScaleEvent,
    convert_with_behavior_rate,
    convert_with_rules,
    stabilize,
    stabilize_with_behavior,
    store_scale_event,
)
from lab.hpa.features import DEFAULT_VERSION, ClusterFeatures, cluster_features
from lab.hpa.proposals import MetricsOutcome, compute_for_metrics
from lab.hpa.replicas import Items, Reading, Scale, Tolerances
from lab.hpa.spec import Behavior, HPASpec, with_defaults
from lab.hpa.status import Condition, Conditions


@dataclass(frozen=True)
class ControllerSettings:
    """kube-controller-manager flags of the HPA controller
    and the cluster it runs in (defaults are Kubernetes')."""

    sync_period: float = 15.0
    """`--horizontal-pod-autoscaler-sync-period` (seconds)."""
    tolerance: float = 0.1
    """`--horizontal-pod-autoscaler-tolerance`: ratios within 1 ± tolerance cause no change."""
    downscale_stabilization: float = 300.0
    """`--horizontal-pod-autoscaler-downscale-stabilization` (seconds)."""
    kubernetes_version: str = DEFAULT_VERSION
    """The cluster's version: feature gate defaults and the controller's handling of 0 replicas."""
    scale_to_zero_gate: bool | None = None
    """`--feature-gates=HPAScaleToZero=...`; `None` is the version's default."""
    configurable_tolerance_gate: bool | None = None
    """`--feature-gates=HPAConfigurableTolerance=...`; `None` is the version's default."""
    scale_up_limit_factor: float = 2.0
    """`scaleUpLimitFactor` of the legacy path: a package variable, not a flag (its tests set it to 8)."""
    scale_up_limit_minimum: float = 4.0
    """`scaleUpLimitMinimum` of the legacy path."""
    features: ClusterFeatures = field(init=False, repr=False, compare=False)
    """The gates as resolved for `kubernetes_version`."""

    def __post_init__(self) -> None:
        resolved = cluster_features(
            self.kubernetes_version,
            scale_to_zero=self.scale_to_zero_gate,
            configurable_tolerance=self.configurable_tolerance_gate,
        )
        object.__setattr__(self, "features", resolved)


@dataclass(frozen=True)
class SyncResult:
    """The outcome of one sync, with the conditions `kubectl describe hpa` would show after it."""

    time: float
    current_replicas: int
    desired_replicas: int
    """What `scale.spec.replicas` is set to (equal to current when nothing changes)."""
    proposal: int | None
    """The metrics' proposal before stabilization and limits (`None` when metrics were not used)."""
    proposals: tuple[int | None, ...]
    """Each metric's proposal, `None` where it failed or was not computed."""
    rescale: bool
    conditions: tuple[Condition, ...] = ()
    """`status.conditions` after the sync, in the controller's order."""
    current_metrics: tuple[int | None, ...] = ()
    """`status.currentMetrics` values in milli-units (per-pod for AverageValue), `None` where unknown."""
    error: str | None = None

    def _reason(self, type_: str) -> str | None:
        return next((c.reason for c in self.conditions if c.type == type_), None)

    @property
    def scaling_active(self) -> str | None:
        """`ScalingActive` reason: ValidMetricFound, FailedGetExternalMetric, ScalingDisabled, ..."""
        return self._reason("ScalingActive")

    @property
    def able_to_scale(self) -> str | None:
        """`AbleToScale` reason: SucceededGetScale, SucceededRescale, ReadyForNewScale, Scale*Stabilized."""
        return self._reason("AbleToScale")

    @property
    def scaling_limited(self) -> str | None:
        """`ScalingLimited` reason: DesiredWithinRange, ScaleUpLimit,
        ScaleDownLimit, TooManyReplicas, TooFewReplicas."""
        return self._reason("ScalingLimited")

    @property
    def scaled_to_zero(self) -> str | None:
        """`ScaledToZero` reason: ScaledToZero or NotScaledToZero; `None` when absent."""
        return self._reason("ScaledToZero")


class HorizontalController:
    """One HPA's status and controller memory (recommendations, scale events) and its sync step.

    `conditions` is the HPA's status as it stands (a real HPA may start with some); `recommendations`
    `None` lets the first sync record the current count, as the controller does for a new HPA."""

    def __init__(
        self,
        spec: HPASpec,
        settings: ControllerSettings | None = None,
        *,
        conditions: Iterable[Condition] = (),
        recommendations: Sequence[Recommendation] | None = None,
        scale_up_events: Sequence[ScaleEvent] = (),
        scale_down_events: Sequence[ScaleEvent] = (),
    ) -> None:
        self.spec = spec
        """Read at every sync, like the HPA object: assign a new one to change min/max or metrics."""
        self.settings = settings or ControllerSettings()
        self.conditions = Conditions(conditions)
        self.recommendations: list[Recommendation] | None = (
            None if recommendations is None else list(recommendations)
        )
        self.scale_up_events = list(scale_up_events)
        self.scale_down_events = list(scale_down_events)
        self._completed: tuple[Behavior, Behavior] | None = None

    @property
    def behavior(self) -> Behavior | None:
        """`spec.behavior` completed with the API defaults and the downscale window flag."""
        given = self.spec.behavior
        if given is None:
            return None
        # Completed once per `spec.behavior` (frozen: a new spec brings a new object), not at every
        # sync: a backtest syncs ~11,000 times a simulated day.
        if self._completed is None or self._completed[0] is not given:
            completed = with_defaults(given)
            assert completed.scale_up is not None and completed.scale_down is not None
            self._completed = (given, completed)
        return self._completed[1]

    def tolerances(self) -> Tolerances:
        """`tolerancesForHpa`: the flag, overridden per direction by `behavior` when the gate is on."""
        default = self.settings.tolerance
        behavior = self.spec.behavior
        if behavior is None or not self.settings.features.configurable_tolerance:
            return Tolerances(default, default)
        down, up = behavior.scale_down, behavior.scale_up
        return Tolerances(
            down.tolerance if down and down.tolerance is not None else default,
            up.tolerance if up and up.tolerance is not None else default,
        )

    def sync(self, now: float, scale: Scale, readings: Sequence[Reading | Items]) -> SyncResult:
        """One `reconcileAutoscaler` pass: `readings` holds one entry per `spec.all_metrics`, in order
        (an External metric's value, or its items one by one)."""
        spec, features, conditions = self.spec, self.settings.features, self.conditions
        if len(readings) != len(spec.all_metrics):
            raise ValueError(f"hpa sync needs {len(spec.all_metrics)} readings, got {len(readings)}")
        conditions.set("AbleToScale", True, "SucceededGetScale")
        current = scale.spec_replicas
        if self.recommendations is None:
            self.recommendations = [Recommendation(current, now)]
        minimum = spec.min_replicas
        scaled_to_zero = features.scale_to_zero and conditions.is_true("ScaledToZero")

        desired, outcome, needs_metrics = 0, None, True
        if current == 0:
            if not self._computes_at_zero(scaled_to_zero):
                conditions.set("ScalingActive", False, "ScalingDisabled")
                if features.scaled_to_zero_condition and not features.scale_to_zero:
                    conditions.remove("ScaledToZero")
                return self._result(now, current, current, None, False, None)
        elif current > spec.max_replicas:
            desired, needs_metrics = spec.max_replicas, False
        elif current < minimum:
            desired, needs_metrics = minimum, False
        if needs_metrics:
            outcome = compute_for_metrics(spec, scale, readings, self.tolerances())
            if outcome.replicas is None:
                conditions.set("ScalingActive", False, outcome.failure_reason or "")
                return self._result(now, current, current, outcome, False, outcome.error)
            conditions.set("ScalingActive", True, "ValidMetricFound")
            desired = self._normalize(now, current, max(desired, outcome.replicas))
            if current == 0 and minimum != 0 and scaled_to_zero and desired < minimum:
                # minReplicas raised after the HPA scaled to zero: back to the new minimum.
                desired = minimum
        rescale = desired != current
        if rescale:
            self._rescaled(now, current, desired)
        return self._result(now, current, desired, outcome, rescale, outcome.error if outcome else None)

    def _computes_at_zero(self, scaled_to_zero: bool) -> bool:
        """`shouldComputeMetricsForZeroReplicas` (1.36+), or `minReplicas == 0` before."""
        if not self.settings.features.scaled_to_zero_condition:
            return self.spec.min_replicas == 0
        can_scale_from_zero = scaled_to_zero and self.spec.has_object_or_external
        return (self.spec.min_replicas != 0 and scaled_to_zero) or can_scale_from_zero

    def _normalize(self, now: float, current: int, proposal: int) -> int:
        """`normalizeDesiredReplicas` (legacy) or `normalizeDesiredReplicasWithBehaviors`."""
        spec, settings, log = self.spec, self.settings, self.recommendations
        assert log is not None
        behavior = self.behavior
        if behavior is None:
            stabilized = stabilize(log, now, settings.downscale_stabilization, proposal)
            stabilized_reason = "ScaleDownStabilized"
            desired, limited = convert_with_rules(
                current,
                stabilized,
                spec.min_replicas,
                spec.max_replicas,
                settings.scale_up_limit_factor,
                settings.scale_up_limit_minimum,
            )
        else:
            up, down = behavior.scale_up, behavior.scale_down
            assert up is not None and down is not None
            down_window = down.stabilization_window_seconds
            stabilized, stabilized_reason = stabilize_with_behavior(
                log,
                now,
                up.stabilization_window_seconds or 0,
                settings.downscale_stabilization if down_window is None else down_window,
                current,
                proposal,
            )
            desired, limited = convert_with_behavior_rate(
                current,
                stabilized,
                spec.min_replicas,
                spec.max_replicas,
                up,
                down,
                self.scale_up_events,
                self.scale_down_events,
                now,
            )
        able = stabilized_reason if stabilized != proposal else "ReadyForNewScale"
        self.conditions.set("AbleToScale", True, able)
        self.conditions.set("ScalingLimited", desired != stabilized, limited)
        return desired

    def _rescaled(self, now: float, current: int, desired: int) -> None:
        """What follows a successful scale update."""
        features, conditions = self.settings.features, self.conditions
        conditions.set("AbleToScale", True, "SucceededRescale")
        behavior = self.behavior
        if behavior is not None:
            if desired > current:
                store_scale_event(self.scale_up_events, behavior.scale_up, now, desired - current)
            else:
                store_scale_event(self.scale_down_events, behavior.scale_down, now, current - desired)
        if not features.scaled_to_zero_condition:
            return
        if not features.scale_to_zero:
            conditions.remove("ScaledToZero")
        elif (
            current > 0 and desired == 0 and self.spec.min_replicas == 0 and self.spec.has_object_or_external
        ):
            conditions.set("ScaledToZero", True, "ScaledToZero")
        else:
            conditions.set("ScaledToZero", False, "NotScaledToZero")

    def _result(
        self,
        now: float,
        current: int,
        desired: int,
        outcome: MetricsOutcome | None,
        rescale: bool,
        error: str | None,
    ) -> SyncResult:
        return SyncResult(
            now,
            current,
            desired,
            outcome.replicas if outcome else None,
            outcome.proposals if outcome else (),
            rescale,
            self.conditions.snapshot(),
            outcome.current if outcome else (),
            error,
        )
