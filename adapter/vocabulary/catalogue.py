"""The catalogue: which external metrics exist and what each one means.

A `MetricDef` is data, not code. It says which vLLM series a metric reads (with the aliases older vLLM
releases used), how they aggregate over pods and engines, which statistic and window apply, and what to answer
when there is no data. Each source turns it into a query of its own kind: PromQL for Prometheus
(`adapter.vocabulary.promql.catalogue`), snapshot arithmetic for the scrape source. Dashboards and alerts read
the same definitions, so the HPA, the on-call page and the graph all mean the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Final

from adapter.errors import Unresolved
from adapter.vocabulary import gateway, vllm
from adapter.vocabulary.roles import Role

# What more replicas serve. Since vLLM PR #38435 `num_requests_waiting` also counts deferred requests
# (LoRA budget, KV transfer, blocked status), which no new replica takes; where the server breaks the
# queue down its `reason="capacity"` part is read, older servers keep the plain gauge (vllm-metrics.md §2.1).
WAITING_FOR_CAPACITY: Final = vllm.with_breakdown(
    vllm.WAITING_BY_REASON, (("reason", vllm.CAPACITY_REASON),), vllm.NUM_REQUESTS_WAITING
)


class Aggregation(Enum):
    """How a gauge combines over engines and pods."""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"


class Statistic(Enum):
    """Which statistic of a histogram a metric reports."""

    MEAN = "mean"
    QUANTILE = "quantile"
    FORECAST = "forecast"
    """The rate of observations (`_count`) over the window plus its trend (the change from the window
    before) carried `horizon_seconds` ahead: how many events per second to expect then."""


@dataclass(frozen=True)
class GaugeSpec:
    """Aggregate one or more gauge families (each with its aliases) over every matching series."""

    families: tuple[vllm.Family, ...]
    aggregation: Aggregation
    targets: tuple[vllm.Family, ...] | None = field(default=None, kw_only=True)
    """Families whose series prove a target exists besides the metric's own; `None`: vLLM's core
    gauges (`CORE_GAUGES`)."""
    lazy: bool = field(default=False, kw_only=True)
    """The exporter creates the families' series with the first event (the gateway's): on a present
    target a missing family is "none yet", counted as empty (`on_empty`), never a gap."""
    smoothing_seconds: float = field(default=0.0, kw_only=True)
    """Serve the mean over this many seconds instead of the latest value (0: off; `metrics.<name>.smoothing`).
    Prometheus averages each series over the window (`avg_over_time`) before aggregating; the scrape
    source averages the aggregated value of the scrapes in the window (`adapter.sources.smoothing`)."""


@dataclass(frozen=True)
class HistogramSpec:
    """A statistic of a histogram over a sliding window.

    `buckets` are the finite upper bounds the family is expected to have; a quantile that falls in
    the first bucket or beyond the last is interpolated from nothing and is reported as unresolved.
    """

    family: vllm.Family
    statistic: Statistic
    window_seconds: float
    quantile: float
    buckets: tuple[float, ...]
    horizon_seconds: float = 0.0
    """`Statistic.FORECAST` only: how far ahead the trend is carried."""

    @property
    def span_seconds(self) -> float:
        """How much history a value needs: the window, and the window before it for a forecast."""
        return 2 * self.window_seconds if self.statistic is Statistic.FORECAST else self.window_seconds

    @property
    def trend_factor(self) -> float:
        """A forecast is `rate + (rate - rate one window earlier) x trend_factor`: the change per window
        carried over the horizon and half a window more (a windowed rate is half a window late)."""
        return (self.horizon_seconds + self.window_seconds / 2) / self.window_seconds


@dataclass(frozen=True)
class PromQLSpec:
    """A user-defined PromQL template; `<<.LabelMatchers>>` marks where the matchers go.

    `presence`, when given, is a PromQL series selector template (also with `<<.LabelMatchers>>`)
    whose series prove the targets exist and carry the sample timestamp; without it an empty result
    cannot be told from "no targets" and the timestamp is the evaluation time.
    """

    query: str
    presence: str | None = None


@dataclass(frozen=True)
class SaturationSpec(GaugeSpec):
    """How close the pods are to their knee: 1.0 means "the fleet is at the knee".

    Per pod (its series matching the request, summed over its engines):
    `max(inflight / capacity, kv_usage / kv_target, waiting / queue_target)`, where inflight is
    running + waiting and kv_usage the mean over the pod's engines. A target left out (`None`) drops
    its term, as if it were infinite. The value is the **mean over pods** of that per-pod saturation.

    Why the mean: an HPA with a `Value` target computes `desired = ceil(current × value / target)`, so with
    target 1.0 the value must scale like fleet load ÷ (pods × one pod's knee). Each term does: the mean of
    `inflight_p / capacity` is exactly `Σ inflight / (pods × capacity)`, and KV usage and the queue per pod
    also shrink (roughly) as 1/pods when the same load spreads over more pods, so `current × mean` stays the
    number of pods at the knee and the HPA settles where every pod is at its knee. A sum over pods stays at
    the fleet's total however many pods share it, so `current × sum` grows at every sync (a runaway); a max
    over pods follows the hottest pod (one long request) and keeps an idle fleet large. Taking each pod's own
    binding term before averaging (rather than the largest of the fleet-wide averages) never reads lower: a
    fleet whose pods are each at the knee on a different resource reads 1.0, since every pod is full by its
    own binding resource.

    It is a `GaugeSpec` (its `families` are the gauges read, `aggregation` the mean over pods), so it
    follows the gauge rule: an absent or NaN gauge on a present pod is a gap, answered 503.
    """

    capacity: float
    """Requests in flight per pod at the knee (running + waiting); required in configuration."""
    kv_target: float | None = None
    """KV-cache usage (0-1) per pod at the knee; `None` leaves the KV term out."""
    queue_target: float | None = None
    """Waiting requests tolerated per pod; `None` leaves the queue term out."""

    @classmethod
    def of(
        cls, capacity: float, kv_target: float | None = None, queue_target: float | None = None
    ) -> SaturationSpec:
        """The spec for these knee parameters; reads the KV gauge only when its term is in."""
        families: tuple[vllm.Family, ...] = (vllm.NUM_REQUESTS_RUNNING, WAITING_FOR_CAPACITY)
        if kv_target is not None:
            families += (vllm.KV_CACHE_USAGE,)
        return cls(families, Aggregation.AVG, capacity, kv_target, queue_target)


MetricSpec = GaugeSpec | HistogramSpec | PromQLSpec

#: the placeholder user PromQL templates use, as prometheus-adapter does
LABEL_MATCHERS: Final = "<<.LabelMatchers>>"


@dataclass(frozen=True)
class MetricDef:
    """One external metric, as the HPA names it.

    Attributes:
        name: the API name (`vllm_requests_waiting`), a valid resource path segment.
        help: one sentence for discovery, dashboards and `query --help`.
        unit: "requests", "ratio", "seconds" or a free word for user metrics.
        spec: what to read and how to combine it.
        namespaced: whether the path namespace becomes a `namespace` matcher / limits discovery.
        on_empty: the value served when the source is healthy, targets exist and no series has data
            (e.g. no traffic in the window); `None` answers 503 instead.
        max_age_seconds: a sample older than this is stale (503); `None` takes the source's default.
        role: the pool of a P/D fleet the metric reads (`adapter.vocabulary.roles`); `None` reads
            whatever the selector selects.
    """

    name: str
    help: str
    unit: str
    spec: MetricSpec
    namespaced: bool = True
    on_empty: float | None = 0.0
    max_age_seconds: float | None = None
    role: Role | None = None

    def with_overrides(self, **changes: object) -> MetricDef:
        """A copy with some fields replaced (configuration overrides)."""
        return replace(self, **changes)  # type: ignore[arg-type]


DEFAULT_WINDOW_SECONDS: Final = 120.0

BUILTIN: Final[tuple[MetricDef, ...]] = (
    MetricDef(
        name="vllm_requests_waiting",
        help="Requests waiting for scheduling capacity, summed over matching pods and engines.",
        unit="requests",
        spec=GaugeSpec((WAITING_FOR_CAPACITY,), Aggregation.SUM),
    ),
    MetricDef(
        name="vllm_requests_running",
        help="Requests in model execution batches, summed over matching pods and engines.",
        unit="requests",
        spec=GaugeSpec((vllm.NUM_REQUESTS_RUNNING,), Aggregation.SUM),
    ),
    MetricDef(
        name="vllm_requests_inflight",
        help="Running plus waiting requests: the concurrency signal, stable while new replicas start.",
        unit="requests",
        spec=GaugeSpec((vllm.NUM_REQUESTS_RUNNING, WAITING_FOR_CAPACITY), Aggregation.SUM),
    ),
    MetricDef(
        name="vllm_kv_cache_usage",
        help="Mean KV-cache usage over matching pods and engines, as a fraction from 0 to 1.",
        unit="ratio",
        spec=GaugeSpec((vllm.KV_CACHE_USAGE,), Aggregation.AVG),
    ),
    MetricDef(
        name="vllm_tpot_seconds",
        help="Mean per-request time per output token over the window (rate of sum / rate of count).",
        unit="seconds",
        spec=HistogramSpec(
            vllm.TPOT, Statistic.MEAN, DEFAULT_WINDOW_SECONDS, 0.9, vllm.INTER_TOKEN_LATENCY_BUCKETS
        ),
    ),
    MetricDef(
        name="vllm_ttft_seconds",
        help="90th percentile of time to first token over the window.",
        unit="seconds",
        spec=HistogramSpec(vllm.TTFT, Statistic.QUANTILE, DEFAULT_WINDOW_SECONDS, 0.9, vllm.TTFT_BUCKETS),
    ),
)

#: the inference gateway's queue and concurrency (llm-d router / Gateway API inference extension EPP);
#: served beside the vLLM metrics, answering 503 where no EPP is scraped
GATEWAY: Final[tuple[MetricDef, ...]] = (
    MetricDef(
        name="gateway_queue_size",
        help="Requests held in the inference gateway's flow-control queue, before any vLLM pod counts them.",
        unit="requests",
        spec=GaugeSpec(
            (gateway.FLOW_CONTROL_QUEUE_SIZE,),
            Aggregation.SUM,
            targets=(gateway.FLOW_CONTROL_POOL_SATURATION,),
            lazy=True,
        ),
    ),
    MetricDef(
        name="gateway_requests_running",
        help="Requests in flight through the inference gateway, summed over matching models and objectives.",
        unit="requests",
        spec=GaugeSpec((gateway.REQUEST_RUNNING,), Aggregation.SUM, targets=(), lazy=True),
    ),
)

#: metrics whose query only the user can know; they exist once configured
USER_DEFINED_NAMES: Final = ("queue_depth", "dlq_depth")

#: the saturation metric's name; it exists once `metrics.vllm_saturation.capacity` is configured
SATURATION: Final = "vllm_saturation"


def saturation(
    capacity: float,
    kv_target: float | None = None,
    queue_target: float | None = None,
    *,
    name: str = SATURATION,
) -> MetricDef:
    """A saturation metric (`SaturationSpec`) with these knee parameters, as `vllm-autoscale profile`
    measures them. Not built in: a capacity is a property of one model on one GPU, never a default."""
    terms = ["inflight / capacity"]
    if kv_target is not None:
        terms.append("KV usage / kv_target")
    if queue_target is not None:
        terms.append("waiting / queue_target")
    per_pod = f"max({', '.join(terms)})" if len(terms) > 1 else terms[0]
    return MetricDef(
        name=name,
        help=f"Mean over pods of {per_pod} per pod: 1.0 is the knee (use a Value target of 1).",
        unit="ratio",
        spec=SaturationSpec.of(capacity, kv_target, queue_target),
    )


#: the anticipating metric's name; it exists once `metrics.vllm_request_rate_forecast.horizon` is set
FORECAST: Final = "vllm_request_rate_forecast"
FORECAST_WINDOW_SECONDS: Final = 60.0


def forecast(horizon: float, window: float = FORECAST_WINDOW_SECONDS, *, name: str = FORECAST) -> MetricDef:
    """The request rate expected `horizon` seconds ahead: requests starting per second (the rate of
    vLLM's time-to-first-token `_count`) over `window`, plus its trend. Not built in: the horizon is
    one HPA sync period plus one cold start of the cluster, never a default. Requests that wait in a
    queue start at the replicas' pace, so under a standing queue it reads what the fleet serves, not
    what arrives: pair it with `vllm_requests_inflight` in the same HPA (the larger proposal wins)."""
    return MetricDef(
        name=name,
        help=(
            f"Requests per second expected {horizon:g} s ahead: the start rate over {window:g} s plus "
            "its trend (AverageValue: the knee's rate per replica)."
        ),
        unit="requests/s",
        spec=HistogramSpec(vllm.TTFT, Statistic.FORECAST, window, 0.9, (), horizon_seconds=horizon),
    )


def builtin(name: str) -> MetricDef:
    """The built-in definition called `name`; `KeyError` if there is none."""
    for metric in BUILTIN:
        if metric.name == name:
            return metric
    raise KeyError(name)


#: the scheduler gauges every vLLM engine exports from start-up (vllm-metrics.md §2): a pod exposing
#: any of them is a vLLM target, so a pod lacking one of a metric's gauges is a broken exporter
CORE_GAUGES: Final = (vllm.NUM_REQUESTS_RUNNING, vllm.NUM_REQUESTS_WAITING, vllm.KV_CACHE_USAGE)


def presence_families(spec: GaugeSpec | HistogramSpec) -> tuple[vllm.Family, ...]:
    """The families whose series prove a target exists and whose timestamps date the value.

    For a gauge these are its own families and every core vLLM gauge: a pod that reports running
    requests but no `vllm:num_requests_waiting` is a target of `vllm_requests_waiting` whose gauge is
    absent (503), not a pod that silently drops out of the sum."""
    if isinstance(spec, GaugeSpec):
        targets = CORE_GAUGES if spec.targets is None else spec.targets
        return tuple(dict.fromkeys((*spec.families, *targets)))
    return (tuple(f"{name}_count" for name in spec.family),)


def checked_value(metric: MetricDef, value: float | None) -> float | None:
    """Return `value`, or raise `Unresolved` for a quantile interpolated inside the first bucket or
    past the last finite one (where `histogram_quantile` reports an artefact, not a measurement)."""
    spec = metric.spec
    if value is None or not isinstance(spec, HistogramSpec) or spec.statistic is not Statistic.QUANTILE:
        return value
    if spec.buckets and value <= spec.buckets[0]:
        raise Unresolved(
            f"p{spec.quantile * 100:g} of {metric.name} = {value:g} "
            f"lies in the first bucket (<= {spec.buckets[0]:g}); "
            "use the mean or finer buckets"
        )
    if spec.buckets and value >= spec.buckets[-1]:
        raise Unresolved(
            f"p{spec.quantile * 100:g} of {metric.name} = {value:g} "
            f"lies past the last finite bucket ({spec.buckets[-1]:g})"
        )
    return value
