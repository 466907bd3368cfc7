"""Shared builders for the HPA model's tests, and the set-up of the Kubernetes tests they port.

The ported cases follow `pkg/controller/podautoscaler/horizontal_test.go` and `replica_calculator_test.go`:
their harness runs one `reconcileAutoscaler` against fake clients with a 0.1 tolerance, a 5 minute
downscale window, every pod Running and Ready, and `scaleUpLimitFactor` set to 8 (`init()` there).
Their feature gates are the tree's defaults unless a case sets one: `HPAScaleToZero` off (as in 1.36)
and `HPAConfigurableTolerance` on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lab.hpa import (
    Condition,
    ControllerSettings,
    ExternalMetric,
    HorizontalController,
    HPASpec,
    Reading,
    Recommendation,
    Scale,
)

SYNC = 15.0
NOW = 10_000.0
"""The ported cases' time.Now(): far enough from 0 that every history entry has a positive time."""


def average(target: str = "1", name: str = "vllm_requests_inflight") -> ExternalMetric:
    return ExternalMetric(name, "AverageValue", target)


def value(target: str, name: str = "vllm_kv_cache_usage") -> ExternalMetric:
    return ExternalMetric(name, "Value", target)


def milli(quantity: int, target_type: str = "Value", name: str = "qps") -> ExternalMetric:
    """A target given as `resource.NewMilliQuantity(quantity, ...)`, as the Go cases write them."""
    return ExternalMetric(name, "Value" if target_type == "Value" else "AverageValue", f"{quantity}m")


def steady(replicas: int) -> Scale:
    """A target whose pods all exist and are Ready (the Go fakes' default)."""
    return Scale(replicas, replicas, replicas)


def units(n: float) -> int:
    """n units in milli-units; with an AverageValue target of 1 the value is the proposal itself."""
    return round(n * 1000)


def run(
    controller: HorizontalController,
    start: int,
    reading: Callable[[float], Sequence[Reading]],
    until: float,
    period: float = SYNC,
) -> list[int]:
    """Sync every `period` seconds from t=0 to `until`; pods appear
    and vanish at once. Returns each sync's desired count."""
    replicas, history, now = start, [], 0.0
    while now <= until:
        replicas = controller.sync(now, steady(replicas), reading(now)).desired_replicas
        history.append(replicas)
        now += period
    return history


def changes(history: Sequence[int]) -> list[int]:
    """The distinct successive replica counts of a run."""
    return [h for i, h in enumerate(history) if i == 0 or h != history[i - 1]]


# --- the Kubernetes tests' harness --------------------------------------------------------------------


def go_settings(
    scale_to_zero: bool | None = False, configurable_tolerance: bool | None = None
) -> ControllerSettings:
    """`newHorizontalSetup`: flags of the Go tests, gates of their tree unless a case sets one."""
    return ControllerSettings(
        tolerance=0.1,
        downscale_stabilization=300.0,
        kubernetes_version="1.37",
        scale_to_zero_gate=scale_to_zero,
        configurable_tolerance_gate=configurable_tolerance,
        scale_up_limit_factor=8.0,
    )


def go_controller(
    spec: HPASpec,
    *,
    scale_to_zero: bool | None = False,
    configurable_tolerance: bool | None = None,
    initial: Sequence[Condition] = (),
    recommendations: Sequence[Recommendation] | None = None,
) -> HorizontalController:
    """A controller as a Go case builds it: `initialConditions`, `recommendations` (nil: the first sync
    records the current count; empty: nothing recorded)."""
    return HorizontalController(
        spec,
        go_settings(scale_to_zero, configurable_tolerance),
        conditions=initial,
        recommendations=recommendations,
    )


def cond(type_: str, status: bool, reason: str) -> Condition:
    return Condition(type_, status, reason)  # type: ignore[arg-type]


STATUS_OK = (
    cond("AbleToScale", True, "SucceededRescale"),
    cond("ScalingActive", True, "ValidMetricFound"),
    cond("ScalingLimited", False, "DesiredWithinRange"),
)
"""`statusOk` of horizontal_test.go."""

SCALED_TO_ZERO = cond("ScaledToZero", True, "ScaledToZero")
NOT_SCALED_TO_ZERO = cond("ScaledToZero", False, "NotScaledToZero")
DISABLED = (cond("AbleToScale", True, "SucceededGetScale"), cond("ScalingActive", False, "ScalingDisabled"))
"""The conditions after a sync that found scaling disabled at 0 replicas."""


def status_ok_with(*overrides: Condition) -> tuple[Condition, ...]:
    """`statusOkWithOverrides`: `statusOk` with each override set in place, or appended."""
    items = list(STATUS_OK)
    for override in overrides:
        index = next((i for i, c in enumerate(items) if c.type == override.type), None)
        if index is None:
            items.append(override)
        else:
            items[index] = override
    return tuple(items)
