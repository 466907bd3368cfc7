"""Scaling policies to compare: HPA candidates on the adapter's metrics, and the baselines.

A `Policy` is what a team would deploy (an HPA on one metric and target, optionally a second metric
as a guard, its behaviour, min/max) plus what the cluster adds around it (cold start, the metric
pipeline's lag and refresh interval, the controller's sync period). Baselines answer "compared to
what": a utilisation-style HPA on the GPU busy fraction, a fixed fleet sized for the peak, a scaler
that knows the future (foresight, the cost denominator) and one that knows the present at once (the
reactive bound); the two bounds are not candidates (`lab.backtest.plans`). `builtin_sweep` is the
sweep teams otherwise run by hand, the anticipating policy (`anticipating`) included.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final, Literal

from lab.backtest.calibration import ServiceModel
from lab.hpa import Behavior, ExternalMetric, HPASpec, ScalingRules, TargetType
from lab.sizing import ANTICIPATE_SCALE_DOWN_SECONDS, KNEE_SHARE

Kind = Literal["hpa", "fixed", "foresight", "reactive"]

#: metrics the fleet model can compute, as the adapter serves them (catalogue names), plus the
#: utilisation baseline's GPU busy fraction (DCGM_FI_DEV_GPU_UTIL, percent)
METRICS: Final = (
    "vllm_requests_inflight",
    "vllm_requests_waiting",
    "vllm_requests_running",
    "vllm_kv_cache_usage",
    "vllm_saturation",
    "queue_depth",
    "gpu_utilization",
    "vllm_request_rate_forecast",
)
#: the anticipating metric: requests per second expected one sync period plus one cold start ahead
FORECAST: Final = "vllm_request_rate_forecast"
#: a durable upstream queue (SQS-like): requests wait there while no replica serves, so scaling to 0
#: loses nothing; every other metric is read from the replicas, so with none there is no value
DURABLE: Final = "queue_depth"


@dataclass(frozen=True)
class Pipeline:
    """How fresh the value the HPA reads is."""

    interval: float
    """Seconds between refreshes of the value (the adapter's scrape, or Prometheus's scrape interval)."""
    lag: float
    """Seconds from the fleet's state to the value being served (scrape, rule evaluation, cache)."""


#: the adapter scraping pods itself (about 1 s fresh), or reading Prometheus (a 15 s scrape interval
#: and the adapter's refresh on top)
PIPELINES: Final = {"scrape": Pipeline(1.0, 1.0), "prometheus": Pipeline(15.0, 15.0)}


@dataclass(frozen=True)
class Saturation:
    """`metrics.vllm_saturation` settings: in-flight per pod at the knee, and the optional terms."""

    capacity: float
    kv_target: float | None = None
    queue_target: float | None = None


@dataclass(frozen=True)
class Forecast:
    """`metrics.vllm_request_rate_forecast` settings: the arrival rate over `window` plus its trend
    (the change of that rate over the previous window) carried `horizon` seconds ahead."""

    horizon: float
    """Seconds ahead: one sync period plus one cold start, the time a replica asked for now takes to serve."""
    window: float = 60.0
    """Seconds of arrivals the rate is read over (`rate(...[1m])`); the trend compares two such windows."""


@dataclass(frozen=True)
class Guard:
    """A second metric of the same HPA: the controller takes the larger of the two proposals, so a
    fast reactive signal catches what the forecast did not see (a step nothing announced)."""

    metric: str
    target_type: TargetType
    target: float


@dataclass(frozen=True)
class Policy:
    """One way to scale, and the cluster around it."""

    name: str
    kind: Kind = "hpa"
    metric: str = "vllm_requests_inflight"
    target_type: TargetType = "AverageValue"
    target: float = 1.0
    min_replicas: int = 1
    max_replicas: int = 8
    behavior: Behavior | None = None
    """`spec.behavior`; `None` takes the controller's defaults (legacy path), as an HPA without one does."""
    cold_start: float = 60.0
    """Seconds from a new replica's creation to Ready."""
    pipeline: Pipeline = PIPELINES["scrape"]
    sync_period: float = 15.0
    tolerance: float = 0.1
    downscale_stabilization: float = 300.0
    saturation: Saturation | None = None
    replicas: int | None = None
    """The fixed fleet's size (`kind: fixed`)."""
    knee_rate: float | None = None
    """Requests per second one replica takes at the knee for the SLO, which foresight sizes the fleet
    against; `None`: the service model's (`ServiceModel.knee_rate` at the backtest's TPOT objective)."""
    forecast: Forecast | None = None
    """The anticipating metric's settings (`metric: vllm_request_rate_forecast`)."""
    guard: Guard | None = None
    """The HPA's second metric, if any."""
    smoothing: float = 0.0
    """Seconds the served gauges are averaged over (the adapter's `smoothing`); 0: each scrape as read."""
    baseline: bool = False
    """A reference point the decision may still reject or recommend, unlike the foresight bound."""

    def __post_init__(self) -> None:
        if self.kind == "hpa" and self.metric not in METRICS:
            raise ValueError(f"policy {self.name!r} metric {self.metric!r} must be one of {list(METRICS)}")
        if self.kind == "hpa" and not self.target > 0:
            raise ValueError(f"policy {self.name!r} target {self.target!r} must be positive")
        if self.min_replicas == 0 and self.kind == "hpa" and self.metric != DURABLE:
            raise ValueError(
                f"policy {self.name!r} min_replicas 0 needs the durable {DURABLE!r} metric: with no replica "
                f"{self.metric!r} has no value and requests have nowhere to wait"
            )
        if not 0 <= self.min_replicas <= self.max_replicas or self.max_replicas < 1:
            raise ValueError(
                f"policy {self.name!r} replicas min {self.min_replicas} max {self.max_replicas} "
                "must satisfy 0 <= min <= max and max >= 1"
            )
        if self.metric == "vllm_saturation" and self.kind == "hpa" and self.saturation is None:
            raise ValueError(f"policy {self.name!r} on vllm_saturation needs saturation.capacity")
        if self.metric == FORECAST and self.kind == "hpa" and self.forecast is None:
            raise ValueError(f"policy {self.name!r} on {FORECAST} needs forecast.horizon")
        if self.guard is not None and self.guard.metric not in METRICS:
            raise ValueError(
                f"policy {self.name!r} guard metric {self.guard.metric!r} must be one of {list(METRICS)}"
            )
        if self.cold_start < 0 or self.sync_period <= 0:
            raise ValueError(f"policy {self.name!r} needs cold_start >= 0 and sync_period > 0")
        if not self.smoothing >= 0:
            raise ValueError(
                f"policy {self.name!r} smoothing {self.smoothing!r} must be 0 (off) or more seconds"
            )
        if self.kind == "hpa":
            # The API server's validation of the HPA this policy would be (behavior limits and all).
            HPASpec(
                max_replicas=self.max_replicas,
                metrics=self.external_metrics(),
                min_replicas=self.min_replicas,
                behavior=self.behavior,
            )

    def external_metrics(self) -> tuple[ExternalMetric, ...]:
        """The HPA's `spec.metrics`: the policy's metric, then the guard's."""
        main = ExternalMetric(self.metric, self.target_type, f"{self.target:g}")
        if self.guard is None:
            return (main,)
        return main, ExternalMetric(self.guard.metric, self.guard.target_type, f"{self.guard.target:g}")

    @property
    def durable(self) -> bool:
        """Requests survive zero replicas in an upstream queue."""
        return self.kind == "hpa" and self.metric == DURABLE

    @property
    def candidate(self) -> bool:
        """Deployable, so the decision judges it (the foresight and reactive bounds are not)."""
        return self.kind not in ("foresight", "reactive")

    def describe(self) -> str:
        """`vllm_requests_inflight AverageValue 4, 1-8 replicas` and the like."""
        if self.kind == "fixed":
            return f"fixed fleet of {self.replicas} replicas"
        if self.kind == "reactive":
            return (
                "reactive bound: sized at the knee for the busiest "
                f"10 s of the last {self.downscale_stabilization:g} s "
                f"(the scale-down window), known at once with no lag or tolerance; replicas serve one "
                f"{self.cold_start:g} s cold start later"
            )
        if self.kind == "foresight":
            knee = "" if self.knee_rate is None else f" at {self.knee_rate:.3g} req/s per replica (the knee)"
            return (
                f"perfect foresight: sized{knee} for the traffic ahead, each replica started one "
                f"{self.cold_start:g} s cold start before it is needed, "
                f"{self.min_replicas}-{self.max_replicas} replicas"
            )
        guard = (
            ""
            if self.guard is None
            else f" + {self.guard.metric} {self.guard.target_type} {self.guard.target:g}"
        )
        smoothed = f", averaged over {self.smoothing:g} s" if self.smoothing > 0 else ""
        return (
            f"{self.metric} {self.target_type} {self.target:g}{guard}{smoothed}, "
            f"{self.min_replicas}-{self.max_replicas} replicas"
        )


@dataclass(frozen=True)
class SweepSettings:
    """What every policy of a sweep shares."""

    min_replicas: int = 1
    max_replicas: int = 8
    cold_start: float = 60.0
    pipeline: Pipeline = PIPELINES["scrape"]
    sync_period: float = 15.0
    knee_rate: float | None = None
    """Requests per second one replica takes at the knee for the SLO (`Calibration.knee_rate`)."""


def default_max_replicas(peak_rate: float, capacity: float) -> int:
    """Room for twice the peak (the HPA overshoots; a tight max would hide a policy's appetite)."""
    return max(2, math.ceil(2 * peak_rate / capacity))


def fixed_for_peak(peak_rate: float, knee: float) -> int:
    """Replicas that take the busiest minute at the knee for the SLO (`knee` requests per second per
    replica, the rate foresight sizes against), not at saturation: a fleet that only just keeps up
    with its peak queues and misses TPOT there."""
    return max(1, math.ceil(peak_rate / knee - 1e-9))


def knee_of(base: Policy, model: ServiceModel) -> float:
    """Requests per second one replica takes at the knee for the SLO: the sweep's (`knee_rate`, from
    a profile or the capacity model at the SLO), else `KNEE_SHARE` of capacity."""
    return base.knee_rate or KNEE_SHARE * model.capacity


def builtin_sweep(
    model: ServiceModel,
    settings: SweepSettings,
    peak_rate: float,
    saturation: Mapping[str, float] | None = None,
) -> list[Policy]:
    """The built-in candidates and baselines (README 'Choosing a policy from your own traffic');
    `saturation` is a profile's `vllm_saturation` parameters (else the model's knee)."""
    base = Policy(
        "base",
        min_replicas=settings.min_replicas,
        max_replicas=settings.max_replicas,
        cold_start=settings.cold_start,
        pipeline=settings.pipeline,
        sync_period=settings.sync_period,
        knee_rate=settings.knee_rate,
    )
    targets = [2.0, 4.0, 6.0, 8.0]
    # DESIGN.md's recommendation for in-flight: 0.75 x the batch a replica holds.
    recommended = float(round(0.75 * model.slots))
    if recommended not in targets and recommended > 0:
        targets.append(recommended)
    policies = [
        replace(base, name=f"inflight-{t:g}", metric="vllm_requests_inflight", target=t) for t in targets
    ]
    policies += [
        replace(base, name="waiting-2", metric="vllm_requests_waiting", target=2.0),
        replace(base, name="waiting-10", metric="vllm_requests_waiting", target=10.0),
        replace(base, name="kv-0.8", metric="vllm_kv_cache_usage", target_type="Value", target=0.8),
        replace(
            base,
            name="saturation-1.0",
            metric="vllm_saturation",
            target_type="Value",
            target=1.0,
            saturation=Saturation(
                saturation["capacity"], saturation.get("kv_target"), saturation.get("queue_target")
            )
            if saturation and "capacity" in saturation
            else Saturation(round(model.knee_inflight(), 2)),
        ),
        replace(base, name="queue-depth-5", metric="queue_depth", target=5.0, min_replicas=0),
    ]
    policies += anticipating(base, model)
    return policies + baselines(base, model, peak_rate)


def anticipating(base: Policy, model: ServiceModel) -> list[Policy]:
    """The anticipating policy: the arrival-rate forecast one sync period plus one cold start ahead,
    AverageValue the knee's rate per replica over 1 + the HPA's tolerance (the controller leaves a
    fleet alone within its tolerance, so a target at the knee itself would let replicas run up to 10 %
    past it), guarded by in-flight requests at the knee's batch (what the forecast missed shows as
    requests held); and the same with the scale-down window of the history the forecast reads
    (`ANTICIPATE_SCALE_DOWN_SECONDS`, 120 s), since the forecast sees a rise coming and the default
    300 s keeps replicas a rise no longer needs."""
    knee = knee_of(base, model)
    forecast = Forecast(horizon=base.sync_period + base.cold_start)
    guard = Guard("vllm_requests_inflight", "AverageValue", round(max(1.0, model.batch_at(knee)), 1))
    target = round(knee / (1 + base.tolerance), 3)
    anticipate = replace(
        base, name="anticipate", metric=FORECAST, target=target, forecast=forecast, guard=guard
    )
    window = ANTICIPATE_SCALE_DOWN_SECONDS
    quick = Behavior(scale_down=ScalingRules(stabilization_window_seconds=round(window)))
    return [anticipate, replace(anticipate, name=f"anticipate-down-{window:g}", behavior=quick)]


def baselines(base: Policy, model: ServiceModel, peak_rate: float) -> list[Policy]:
    """Utilisation HPA at 80 %, a fixed fleet for the peak at the knee, and perfect foresight."""
    return [
        replace(base, name="gpu-util-80", metric="gpu_utilization", target=80.0, baseline=True),
        replace(
            base,
            name="fixed-peak",
            kind="fixed",
            replicas=fixed_for_peak(peak_rate, knee_of(base, model)),
            baseline=True,
        ),
        replace(base, name="foresight", kind="foresight", baseline=True),
        replace(base, name="reactive-bound", kind="reactive", baseline=True),
    ]
