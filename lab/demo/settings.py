"""The settings of one demo run: the traffic profile, the HPA under test and the emulated fleet.

Durations are emulated seconds (see `lab.demo.runner`); a `None` takes the profile's value, so
`--profile smoke` and the default profile each bring their own time constants, and `--profile
zero-idle` its queue, its `minReplicas: 0` and its metric.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from adapter.vocabulary.catalogue import FORECAST
from lab.demo.capacity import ENGINES
from lab.demo.cluster.upstream import QueueSettings
from lab.demo.demand import METRIC as DEMAND_METRIC
from lab.demo.loadgen import Scenario
from lab.emulator import EngineParams
from lab.hpa import DEFAULT_VERSION, Behavior, TargetType
from lab.sizing import ANTICIPATE_SCALE_DOWN_SECONDS, KNEE_SHARE
from lab.slo import Slo

#: In-flight requests: the reactive signal, and the anticipating policy's guard in the same HPA.
DIRECT_METRIC: Final = "vllm_requests_inflight"
QUEUE_METRIC: Final = "queue_depth"
#: The anticipating metric (README 'Choosing a metric and a target'): the request rate one sync period
#: plus one cold start ahead, with in-flight requests as its guard in the same HPA. What the HPA scales
#: on without `--metric`, unless the profile goes through a queue (then `queue_depth`).
FORECAST_METRIC: Final = FORECAST
#: The unit of a target where it is not a count: the forecast is requests per second of the cluster's
#: clock (the emulated one; the demo converts its adapter's, `time_scale` times slower).
TARGET_UNITS: Final = {FORECAST_METRIC: "req/s"}


def target_text(metric: str, target_type: str, target: str | float) -> str:
    """`vllm_request_rate_forecast AverageValue 0.524 req/s`:
    a target as every output of the demo prints it."""
    value = float(target)
    unit = TARGET_UNITS.get(metric)
    return f"{metric} {target_type} {value:.3g}" + (f" {unit}" if unit else "")


@dataclass(frozen=True)
class DemoSettings:
    """Everything a demo run needs; durations in emulated seconds."""

    profile: Scenario
    out: Path
    metric: str | None = None
    """`None`: `queue_depth` for a profile through a queue,
    `vllm_request_rate_forecast` (guarded by `vllm_requests_inflight`) otherwise."""
    target_type: TargetType = "AverageValue"
    target: float | None = None
    """`None`: 0.75 × max_num_seqs for an in-flight AverageValue (DESIGN.md), 1 for Value, and for
    `queue_depth` what one replica drains in one cold start (see `target_value`)."""
    engine: str = "demo"
    time_scale: float | None = None
    """Emulated seconds per second of the loop's clock; `None` takes the profile's."""
    real_time: bool = False
    """Pace the run on the wall clock (to watch it, or query the adapter while it runs); by default
    it runs on virtual time (`lab.virtual_time`): repeatable for a seed, as fast as the CPU allows."""
    sync_period: float = 15.0
    tolerance: float = 0.1
    downscale_stabilization: float | None = None
    """`None` takes the profile's; for the forecast, at most `ANTICIPATE_SCALE_DOWN_SECONDS`."""
    cold_start: float | None = None
    """A new replica's load delay; `None` takes the profile's."""
    min_replicas: int | None = None
    """`None` takes the profile's (0 for `zero-idle`, else 1)."""
    max_replicas: int = 8
    capacity: float | None = None
    """Requests/s of one replica; `None` measures it for the engine preset."""
    scrape_interval: float = 5.0
    """Emulated seconds between the adapter's scrapes (a third of a sync period); the adapter, which
    reads the event loop's clock, gets `scrape_seconds`."""
    tick: float = 5.0
    seed: int = 0
    slo: Slo = field(default_factory=Slo)
    namespace: str = "default"
    live: bool | None = None
    """Redraw the view in place (`None`: when the output is a terminal)."""
    kubernetes_version: str = DEFAULT_VERSION
    """The cluster the HPA model plays: its feature gates
    (`HPAScaleToZero` admits minReplicas 0 from 1.37)."""
    queue: QueueSettings | None = None
    """The upstream queue; `None` takes one when the profile goes through a queue."""
    baseline: bool = True
    """For a run that may scale to zero, also play it with minReplicas 1 to compare GPU-replica-hours."""
    behavior: Behavior | None = None
    """The HPA's `spec.behavior`; `None` leaves it unset (the controller's legacy rules)."""
    demand_utilisation: float = 0.75
    """For `inflight_within_demand`: the share of its measured capacity a replica serves at target."""

    guard: float | None = None
    """The in-flight guard's AverageValue beside the forecast or the queue; `None`: 0.75 x max_num_seqs."""
    policy: str | None = None
    """The decision lab's name of the policy the run plays, when the demo chose it
    (`lab.demo.decision.choice`)."""

    engine_params: EngineParams | None = None
    """An engine of its own (a profiled server's twin, `--engine-profile`); `None`: the `engine` preset."""

    @property
    def params(self) -> EngineParams:
        """The engine's parameters: its own, else the preset's."""
        return self.engine_params if self.engine_params is not None else ENGINES[self.engine]

    @property
    def scale(self) -> float:
        """Emulated seconds per real second in effect."""
        return self.time_scale or self.profile.time_scale

    @property
    def scrape_seconds(self) -> float:
        """The scrape interval in seconds of the event loop's clock, as the adapter is configured."""
        return self.scrape_interval / self.scale

    @property
    def stabilization(self) -> float:
        """The downscale stabilization window in effect (emulated seconds): the one given, else the
        profile's, which the forecast shortens to the history it reads (`lab.sizing`)."""
        if self.downscale_stabilization:
            return self.downscale_stabilization
        if self.metric_name == FORECAST_METRIC:
            return min(self.profile.downscale_stabilization, ANTICIPATE_SCALE_DOWN_SECONDS)
        return self.profile.downscale_stabilization

    @property
    def load_delay(self) -> float:
        """A new replica's cold start in effect (emulated seconds)."""
        return self.profile.cold_start if self.cold_start is None else self.cold_start

    @property
    def upstream(self) -> QueueSettings | None:
        """The queue in effect: the one given, else a default one for a profile through a queue."""
        if self.queue is not None:
            return self.queue
        return QueueSettings() if self.profile.queue else None

    @property
    def metric_name(self) -> str:
        """The HPA's External metric in effect."""
        if self.metric is not None:
            return self.metric
        return QUEUE_METRIC if self.upstream is not None else FORECAST_METRIC

    @property
    def minimum(self) -> int:
        """`minReplicas` in effect."""
        return self.profile.min_replicas if self.min_replicas is None else self.min_replicas

    @property
    def start_replicas(self) -> int:
        """Replicas loaded when the load starts: the profile's, at least `minimum`, at least one."""
        return max(self.profile.start_replicas, self.minimum, 1)

    def target_value(self, capacity: float) -> float:
        """The HPA target in effect, given one replica's `capacity` (requests/s).

        For `queue_depth` (AverageValue) the default is the messages one replica drains in one cold
        start: a replica asked for now serves only after its cold start, so a backlog smaller than that
        per replica is cleared by the replicas already there or loading before a new one could help.
        """
        if self.target is not None:
            return self.target
        if self.target_type == "Value":
            return 1.0
        if self.metric_name == QUEUE_METRIC:
            return float(max(1, math.floor(capacity * self.load_delay)))
        if self.metric_name == FORECAST_METRIC:
            # The knee's rate per replica over 1 + tolerance (the HPA leaves a fleet within its tolerance
            # alone), in requests per emulated second: the cluster's (`metrics_client` converts the
            # adapter's).
            return KNEE_SHARE * capacity / (1 + self.tolerance)
        if self.metric_name == DEMAND_METRIC:
            # The cap stops overshoot, so the in-flight part can keep more headroom: half the batch.
            return 0.5 * self.params.max_num_seqs
        return 0.75 * self.params.max_num_seqs
