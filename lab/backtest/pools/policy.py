"""How a disaggregated (P/D) fleet scales: each pool on its own HPA, or the pair as one unit.

A `PairPolicy` is what a team would deploy for one model served as a prefill pool and a decode pool:

* **per role** (`joint=None`): two HorizontalPodAutoscalers, the prefill pool's on its own signal
  (`vllm_prefill_backlog_seconds`, the seconds of prompt tokens its pods hold, a `Value`), the decode
  pool's on its own (`vllm_requests_running` per pod, `vllm_kv_cache_usage`), as the chart deploys them;
* **joint** (`joint=(p, d)`): one autoscaler whose replica is a *unit* of `p` prefill and `d` decode
  pods, the way a LeaderWorkerSet or a fixed xPyD group scales: it reads both pools' signals (the
  controller takes the larger proposal, so neither pool is starved) and keeps the ratio fixed.

The joint HPA reads the same signals with the same targets, restated per unit: a `Value` target is
pool-wide and stays as it is; an `AverageValue` target is per pod of its pool, and a unit holds `p`
(or `d`) of them. So the two policies differ only in the coupling, which is what the comparison is
about.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

from lab.backtest.policy import PIPELINES, Pipeline
from lab.hpa import (
    Behavior,
    ControllerSettings,
    ExternalMetric,
    HorizontalController,
    HPASpec,
    TargetType,
)

Role = Literal["prefill", "decode"]
#: the prefill pool's signal: prompt tokens waiting or in prefill over the pool's measured throughput
BACKLOG: Final = "vllm_prefill_backlog_seconds"
#: what each pool's model computes (`lab.backtest.pools.pool_value`), as the adapter serves it
POOL_METRICS: Final[dict[Role, tuple[str, ...]]] = {
    "prefill": (BACKLOG, "vllm_requests_inflight"),
    "decode": ("vllm_requests_running", "vllm_kv_cache_usage", "vllm_requests_inflight"),
}


@dataclass(frozen=True)
class RoleTarget:
    """One metric of a pool's HPA."""

    metric: str
    target_type: TargetType
    target: float


@dataclass(frozen=True)
class RoleScaling:
    """One pool's autoscaler: its metrics (the controller takes the largest proposal), min and max."""

    role: Role
    targets: tuple[RoleTarget, ...]
    min_replicas: int = 1
    max_replicas: int = 8
    behavior: Behavior | None = None

    def __post_init__(self) -> None:
        for t in self.targets:
            if t.metric not in POOL_METRICS[self.role]:
                raise ValueError(
                    f"the {self.role} pool cannot scale on "
                    f"{t.metric!r}; one of {list(POOL_METRICS[self.role])}"
                )
            if not t.target > 0:
                raise ValueError(f"{self.role} target {t.target!r} for {t.metric} must be positive")
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ValueError(
                f"{self.role} replicas min {self.min_replicas} max "
                f"{self.max_replicas} must satisfy 1 <= min <= max"
            )


@dataclass(frozen=True)
class PairPolicy:
    """A P/D fleet's scaling, and the cluster around it (as `Policy` has it for one pool)."""

    name: str
    prefill: RoleScaling
    decode: RoleScaling
    joint: tuple[int, int] | None = None
    """(prefill, decode) pods of one unit when the pair scales as one; `None`: each pool on its own."""
    cold_start: float = 60.0
    pipeline: Pipeline = PIPELINES["scrape"]
    sync_period: float = 15.0
    tolerance: float = 0.1
    downscale_stabilization: float = 300.0

    def __post_init__(self) -> None:
        if self.joint is not None and not (self.joint[0] >= 1 and self.joint[1] >= 1):
            raise ValueError(f"policy {self.name!r}: a unit needs a pod of each role, not {self.joint}")
        if self.joint is not None and self.max_units < self.min_units:
            raise ValueError(f"policy {self.name!r}: no whole unit of {self.joint} fits both pools' maxima")

    @property
    def min_units(self) -> int:
        """The joint HPA's minReplicas: enough units for both pools' minima."""
        p, d = self.joint or (1, 1)
        return max(1, math.ceil(self.prefill.min_replicas / p), math.ceil(self.decode.min_replicas / d))

    @property
    def max_units(self) -> int:
        """The joint HPA's maxReplicas: the most units both pools' maxima hold."""
        p, d = self.joint or (1, 1)
        return min(self.prefill.max_replicas // p, self.decode.max_replicas // d)

    def controllers(self) -> list[tuple[HorizontalController, tuple[tuple[Role, str], ...]]]:
        """Each HPA with, per metric in order, the pool and metric it reads."""
        settings = ControllerSettings(self.sync_period, self.tolerance, self.downscale_stabilization)
        if self.joint is None:
            return [
                (HorizontalController(_spec(scaling), settings), _reads(scaling))
                for scaling in (self.prefill, self.decode)
            ]
        p, d = self.joint
        spec = HPASpec(
            max_replicas=self.max_units,
            metrics=_metrics(self.prefill, p) + _metrics(self.decode, d),
            min_replicas=self.min_units,
            behavior=self.prefill.behavior,
        )
        return [(HorizontalController(spec, settings), _reads(self.prefill) + _reads(self.decode))]

    def describe(self) -> str:
        """`per role: prefill vllm_prefill_backlog_seconds Value 0.4; decode ...` or the joint unit."""

        def pool(scaling: RoleScaling) -> str:
            metrics = " + ".join(f"{t.metric} {t.target_type} {t.target:g}" for t in scaling.targets)
            return f"{scaling.role} {metrics}"

        both = f"{pool(self.prefill)}; {pool(self.decode)}"
        if self.joint is None:
            return f"per role: {both}"
        p, d = self.joint
        return f"joint {p}P:{d}D units ({self.min_units}-{self.max_units}): {both}"


def _reads(scaling: RoleScaling) -> tuple[tuple[Role, str], ...]:
    return tuple((scaling.role, t.metric) for t in scaling.targets)


def _spec(scaling: RoleScaling) -> HPASpec:
    """One pool's HPA."""
    return HPASpec(
        max_replicas=scaling.max_replicas,
        metrics=_metrics(scaling, 1),
        min_replicas=scaling.min_replicas,
        behavior=scaling.behavior,
    )


def _metrics(scaling: RoleScaling, pods: int) -> tuple[ExternalMetric, ...]:
    """A pool's metrics for a replica of `pods` of its pods: an AverageValue target is per pod of the
    pool, so `pods` times as large per replica; a Value target is pool-wide and stays."""
    return tuple(
        ExternalMetric(
            t.metric, t.target_type, f"{t.target * pods if t.target_type == 'AverageValue' else t.target:g}"
        )
        for t in scaling.targets
    )
