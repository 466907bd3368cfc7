"""Every PromQL expression the dashboards plot, written once (A3: queries apart from panels).

vLLM names, aliases and bucket bounds come from `adapter.vllm`; the autoscaling metrics are the
catalogue rendered by `adapter.promql.value_query`, i.e. the very query the adapter answers the HPA
with; the adapter's own metric names are read from `adapter.telemetry`; the TPOT drift and the queue depths
reuse the alerts' recording rules (`alerts.recording`), so those panels show what the alerts compare,
whatever queue expressions the chart's `prometheusRule.params` configure. Other panels read
raw series: recorded series are per (namespace, model) and could not honour the pod variable. Grafana
variables are ordinary label matchers here (`namespace=~"$namespace"`), so one expression serves
every selection.

Every vLLM query aggregates `engine` (the data-parallel rank) away; quantiles are shown only where
the histogram's buckets resolve them (`vllm-metrics.md` §8).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.utils import floatToGoString

from adapter import vllm
from adapter.catalogue import HistogramSpec, MetricDef, Statistic
from adapter.config import PrometheusSettings
from adapter.promql import PromQL, value_query
from adapter.telemetry import Telemetry
from alerts import recording
from alerts.params import Params


class Query(NamedTuple):
    """One panel query: the PromQL, its legend, and how Grafana runs it."""

    expr: PromQL
    legend: str = ""
    #: evaluate once at the end of the range (tables, label lists) instead of over the range
    instant: bool = False
    #: return labels as columns (table panels)
    table: bool = False


class Histogram(NamedTuple):
    """A vLLM histogram family and the finite bucket bounds it is exposed with."""

    family: vllm.Family
    buckets: tuple[float, ...]


TTFT: Final = Histogram(vllm.TTFT, vllm.TTFT_BUCKETS)
TPOT: Final = Histogram(vllm.TPOT, vllm.INTER_TOKEN_LATENCY_BUCKETS)
ITL: Final = Histogram(vllm.ITL, vllm.INTER_TOKEN_LATENCY_BUCKETS)
E2E: Final = Histogram(vllm.E2E_LATENCY, vllm.REQUEST_LATENCY_BUCKETS)
QUEUE_TIME: Final = Histogram(vllm.QUEUE_TIME, vllm.REQUEST_LATENCY_BUCKETS)
PREFILL: Final = Histogram(vllm.PREFILL_TIME, vllm.REQUEST_LATENCY_BUCKETS)
DECODE: Final = Histogram(vllm.DECODE_TIME, vllm.REQUEST_LATENCY_BUCKETS)

# DCGM exporter fields (default counters, except the throttle reasons, which must be enabled).
GPU_UTIL: Final[vllm.Family] = ("DCGM_FI_DEV_GPU_UTIL",)
FB_USED: Final[vllm.Family] = ("DCGM_FI_DEV_FB_USED",)
FB_FREE: Final[vllm.Family] = ("DCGM_FI_DEV_FB_FREE",)
GPU_TEMP: Final[vllm.Family] = ("DCGM_FI_DEV_GPU_TEMP",)
POWER: Final[vllm.Family] = ("DCGM_FI_DEV_POWER_USAGE",)
XID: Final[vllm.Family] = ("DCGM_FI_DEV_XID_ERRORS",)
# DCGM 3.3 renamed the field (same NVML bitmask); older exporters still expose the old name.
THROTTLE_REASONS: Final[vllm.Family] = (
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
)
#: NVML clock-event reason bits that cost throughput (idle, app-clock and sync-boost bits do not)
THROTTLE_BITS: Final = (
    (0x4, "SW power cap"),
    (0x8, "HW slowdown"),
    (0x20, "SW thermal"),
    (0x40, "HW thermal"),
    (0x80, "HW power brake"),
)

# kube-state-metrics and the CloudWatch exporter (SQS).
HPA_INFO: Final = "kube_horizontalpodautoscaler_info"
HPA_TARGET: Final = "kube_horizontalpodautoscaler_spec_target_metric"
HPA_DESIRED: Final = "kube_horizontalpodautoscaler_status_desired_replicas"
HPA_CURRENT: Final = "kube_horizontalpodautoscaler_status_current_replicas"
HPA_MIN: Final = "kube_horizontalpodautoscaler_spec_min_replicas"
HPA_MAX: Final = "kube_horizontalpodautoscaler_spec_max_replicas"
DEPLOYMENT_READY: Final = "kube_deployment_status_replicas_ready"
POD_PHASE: Final = "kube_pod_status_phase"
POD_REQUESTS: Final = "kube_pod_container_resource_requests"
#: kube-state-metrics sanitises the resource name `nvidia.com/gpu` into a label value
GPU_RESOURCE: Final = "nvidia_com_gpu"
#: the alerts' recorded queue depths (one series per queue; upstream queues and their DLQs apart)
QUEUE_DEPTH: Final = recording.QUEUE_RECORD
DLQ_DEPTH: Final = recording.DLQ_RECORD

RATE: Final = "$__rate_interval"

#: the alerts' default thresholds: a panel's threshold line sits where its alert fires
ALERT_DEFAULTS: Final = Params()

# Grafana variables as matchers.
NAMESPACE: Final = 'namespace=~"$namespace"'
MODEL: Final = f'{vllm.MODEL_LABEL}=~"$model"'
POD: Final = 'pod=~"$pod"'
HPA: Final = 'horizontalpodautoscaler=~"$hpa"'
QUEUE: Final = 'queue_name=~"$queue"'
ADAPTER_METRIC: Final = 'metric=~"$metric"'
#: the vLLM pods the viewer selected
VLLM: Final = (NAMESPACE, MODEL, POD)
#: what an HPA selecting one model sees: every pod of the model, whatever `$pod` says
HPA_VIEW: Final = (NAMESPACE, MODEL)
#: the adapter's own pods (its namespace, not the models')
ADAPTER: Final = (NAMESPACE, POD)

M: Final = vllm.MODEL_LABEL
BY_MODEL: Final = (M,)
BY_POD: Final = ("namespace", "pod")


def _selector(name: str, matchers: Sequence[str]) -> str:
    return f"{name}{{{', '.join(matchers)}}}" if matchers else name


def _series(family: vllm.Family, matchers: Sequence[str]) -> str:
    """Every alias of a family; on a pod exposing two of them, `or` keeps the first (newest)."""
    return " or ".join(_selector(name, matchers) for name in family)


def _rate(family: vllm.Family, suffix: str, matchers: Sequence[str], window: str = RATE) -> str:
    return " or ".join(f"rate({_selector(name + suffix, matchers)}[{window}])" for name in family)


def _by(labels: Sequence[str]) -> str:
    return f"by ({', '.join(labels)})"


def _agg(op: str, labels: Sequence[str], inner: str) -> str:
    return f"{op} {_by(labels)} ({inner})" if labels else f"{op}({inner})"


def _legend(labels: Sequence[str], suffix: str = "") -> str:
    text = " ".join("{{" + label + "}}" for label in labels if label != "namespace")
    return f"{text} {suffix}".strip()


def _q(expr: str, legend: str = "", *, instant: bool = False, table: bool = False) -> Query:
    return Query(PromQL(expr), legend, instant, table)


# --- Variables -------------------------------------------------------------------------------


def label_values(family: vllm.Family, label: str, matchers: Sequence[str] = ()) -> Query:
    """Grafana's `label_values(series, label)` variable query."""
    return _q(f"label_values({_selector(family[0], matchers)}, {label})")


VLLM_PRESENCE: Final = vllm.NUM_REQUESTS_RUNNING


def namespace_variable() -> Query:
    return label_values(VLLM_PRESENCE, "namespace")


def model_variable() -> Query:
    return label_values(VLLM_PRESENCE, M, (NAMESPACE,))


def pod_variable() -> Query:
    return label_values(VLLM_PRESENCE, "pod", (NAMESPACE, MODEL))


def hpa_variable() -> Query:
    return label_values((HPA_INFO,), "horizontalpodautoscaler", (NAMESPACE,))


def queue_variable() -> Query:
    """Upstream queues and dead-letter queues alike, as the alerts' recording rules name them."""
    return _q(f'label_values({{__name__=~"{QUEUE_DEPTH}|{DLQ_DEPTH}"}}, queue_name)')


# --- Gauges and counters ----------------------------------------------------------------------


def gauge(
    family: vllm.Family, op: str, labels: Sequence[str], matchers: Sequence[str] = VLLM, suffix: str = ""
) -> Query:
    """`op by (labels)` over every engine of every matching pod."""
    return _q(_agg(op, labels, _series(family, matchers)), _legend(labels, suffix))


def counter_rate(
    family: vllm.Family, labels: Sequence[str], matchers: Sequence[str] = VLLM, suffix: str = ""
) -> Query:
    """Per-second increase, summed by `labels` (counters are never zero at start: always a rate)."""
    return _q(_agg("sum", labels, _rate(family, "", matchers)), _legend(labels, suffix))


def running(labels: Sequence[str] = BY_MODEL) -> Query:
    return gauge(vllm.NUM_REQUESTS_RUNNING, "sum", labels, suffix="running")


def waiting(labels: Sequence[str] = BY_MODEL) -> Query:
    return gauge(vllm.NUM_REQUESTS_WAITING, "sum", labels, suffix="waiting")


def waiting_by_reason() -> Query:
    return gauge(vllm.WAITING_BY_REASON, "sum", (M, "reason"), suffix="waiting")


def inflight_per_pod() -> Query:
    """Running plus waiting per pod: how evenly the load balancer spreads work."""
    run = _agg("sum", BY_POD, _series(vllm.NUM_REQUESTS_RUNNING, VLLM))
    wait = _agg("sum", BY_POD, _series(vllm.NUM_REQUESTS_WAITING, VLLM))
    return _q(f"{run} + {wait}", "{{pod}}")


def kv_usage(op: str, labels: Sequence[str] = BY_MODEL) -> Query:
    return gauge(vllm.KV_CACHE_USAGE, op, labels, suffix=op)


def serving_pods(matchers: Sequence[str] = VLLM) -> Query:
    """vLLM pods currently exposing engine metrics, per model."""
    pods = _agg("group", (M, "namespace", "pod"), _series(VLLM_PRESENCE, matchers))
    return _q(_agg("count", BY_MODEL, pods), "{{model_name}} pods")


def kv_cache_config() -> Query:
    """KV-cache size per pod, labelled with its model (cache_config_info has no model_name).

    Only labels that exist in every release are kept (`vllm-metrics.md` §2.1); `max by` folds engines.
    """
    info = _agg(
        "max",
        ("namespace", "pod", "num_gpu_blocks", "block_size"),
        _series(vllm.CACHE_CONFIG_INFO, (NAMESPACE, POD)),
    )
    models = _agg("group", ("namespace", "pod", M), _series(VLLM_PRESENCE, VLLM))
    return _q(f"{info} * on (namespace, pod) group_left ({M}) {models}", instant=True, table=True)


def finished_requests(labels: Sequence[str] = (M, "finished_reason")) -> Query:
    """Finished requests per second; `request_success` counts aborts and errors too (§3)."""
    return counter_rate(vllm.REQUEST_SUCCESS, labels)


def request_rate(matchers: Sequence[str] = VLLM) -> Query:
    return _q(f"sum({_rate(vllm.REQUEST_SUCCESS, '', matchers)})", "requests/s")


def failed_ratio() -> Query:
    """Share of finished requests that were aborted or failed."""
    failed = _agg("sum", BY_MODEL, _rate(vllm.REQUEST_SUCCESS, "", (*VLLM, 'finished_reason=~"abort|error"')))
    total = _agg("sum", BY_MODEL, _rate(vllm.REQUEST_SUCCESS, "", VLLM))
    return _q(f"{failed} / {total}", "{{model_name}} aborted or failed")


def admission_rejections() -> Query:
    """HTTP 503s from `--max-num-queued-reqs/-tokens` (this counter has no `engine` label)."""
    return counter_rate(vllm.ADMISSION_REJECTIONS, (M, "reason"), suffix="rejected")


def prompt_tokens(labels: Sequence[str] = BY_MODEL) -> Query:
    return counter_rate(vllm.PROMPT_TOKENS, labels, suffix="prompt")


def generation_tokens(labels: Sequence[str] = BY_MODEL) -> Query:
    return counter_rate(vllm.GENERATION_TOKENS, labels, suffix="generation")


def preemptions(labels: Sequence[str] = BY_MODEL) -> Query:
    return counter_rate(vllm.NUM_PREEMPTIONS, labels, suffix="preemptions")


def prefix_cache_hit_rate(labels: Sequence[str] = BY_MODEL) -> Query:
    """Cached prompt tokens ÷ prompt tokens.

    Never hits ÷ `prefix_cache_queries`: under KV pressure waiting and preempted requests are looked
    up again on every step, inflating queries 4-11× on a real server (`vllm-metrics.md` §8).
    """
    cached = _agg("sum", labels, _rate(vllm.PROMPT_TOKENS_CACHED, "", VLLM))
    total = _agg("sum", labels, _rate(vllm.PROMPT_TOKENS, "", VLLM))
    return _q(f"{cached} / {total}", _legend(labels, "hit rate"))


# --- Histograms -------------------------------------------------------------------------------


def mean(h: Histogram, labels: Sequence[str] = BY_MODEL, suffix: str = "mean") -> Query:
    """Δsum/Δcount: always resolved, whatever the buckets."""
    total = _agg("sum", labels, _rate(h.family, "_sum", VLLM))
    count = _agg("sum", labels, _rate(h.family, "_count", VLLM))
    return _q(f"{total} / {count}", _legend(labels, suffix))


def quantile(h: Histogram, q: float, labels: Sequence[str] = BY_MODEL) -> Query:
    """A quantile, dropped wherever it lies in the first bucket or past the last finite one.

    There `histogram_quantile` interpolates from nothing: a fast model's TPOT p90 read ~9 ms at every
    load while the true mean moved from 1.7 to 3.3 ms (`vllm-metrics.md` §8), the same rule as
    `catalogue.checked_value`. A gap in the line means "unresolved", never "zero".
    """
    buckets = _agg("sum", ("le", *labels), _rate(h.family, "_bucket", VLLM))
    expr = f"(histogram_quantile({q:g}, {buckets}) > {h.buckets[0]:g}) < {h.buckets[-1]:g}"
    return _q(expr, _legend(labels, f"p{q * 100:g}"))


def first_bucket_share(h: Histogram, labels: Sequence[str] = BY_MODEL) -> Query:
    """Share of observations in the first bucket; near 1, quantiles of this histogram say nothing."""
    # vLLM's client renders `le` with floatToGoString ("0.01", "1.0"); match its text exactly.
    le = f'le="{floatToGoString(h.buckets[0])}"'  # type: ignore[no-untyped-call]
    first = _agg("sum", labels, _rate(h.family, "_bucket", (*VLLM, le)))
    count = _agg("sum", labels, _rate(h.family, "_count", VLLM))
    return _q(f"{first} / {count}", _legend(labels, f"≤ {h.buckets[0]:g} s"))


def tpot_drift() -> Query:
    """TPOT over its own baseline, from the alerts' recording rules: exactly what VLLMTPOTDrift compares.

    Recorded per (namespace, model), so the pod variable cannot apply.
    """
    recent = _selector(recording.TPOT_RECORD, (NAMESPACE, MODEL))
    baseline = _selector(recording.TPOT_BASELINE_RECORD, (NAMESPACE, MODEL))
    return _q(f"{recent} / {baseline}", "{{model_name}} last 10 min / previous day")


# --- Autoscaling: the catalogue as the HPA sees it --------------------------------------------


def _as_served(metric: MetricDef, matchers: Sequence[str]) -> str:
    """`value_query`, minus the quantiles the adapter refuses to serve (`catalogue.checked_value`)."""
    expr = value_query(metric, matchers)
    spec = metric.spec
    if isinstance(spec, HistogramSpec) and spec.statistic is Statistic.QUANTILE and spec.buckets:
        return f"(({expr}) > {spec.buckets[0]:g}) < {spec.buckets[-1]:g}"
    return expr


def served(metric: MetricDef) -> Query:
    """Exactly the query the adapter's Prometheus source answers the HPA with (one model)."""
    return _q(_as_served(metric, HPA_VIEW), "served by the adapter")


def served_per_pod(metric: MetricDef) -> Query:
    """The served value ÷ serving pods: what an AverageValue target is compared with."""
    pods = _agg("count", (), _agg("group", ("namespace", "pod"), _series(VLLM_PRESENCE, HPA_VIEW)))
    return _q(f"({value_query(metric, HPA_VIEW)}) / {pods}", "served ÷ pods")


def selection_value(metric: MetricDef) -> Query:
    """A catalogue metric over the viewer's whole selection (pods included)."""
    return _q(_as_served(metric, VLLM), metric.name)


def hpa_target(metric: MetricDef) -> Query:
    """The target the HPAs declare for this external metric (kube-state-metrics)."""
    matchers = (NAMESPACE, HPA, f'metric_name="{metric.name}"')
    inner = _selector(HPA_TARGET, matchers)
    return _q(
        _agg("max", ("horizontalpodautoscaler", "metric_target_type"), inner),
        "target {{metric_target_type}} ({{horizontalpodautoscaler}})",
    )


def hpa_replicas(series: str, suffix: str) -> Query:
    return _q(
        _agg("max", ("horizontalpodautoscaler",), _selector(series, (NAMESPACE, HPA))),
        "{{horizontalpodautoscaler}} " + suffix,
    )


def ready_replicas() -> Query:
    """Ready pods of each HPA's Deployment, joined through the HPA's scale target."""
    target = _selector(HPA_INFO, (NAMESPACE, HPA, 'scaletargetref_kind="Deployment"'))
    join = f'label_replace({target}, "deployment", "$1", "scaletargetref_name", "(.+)")'
    ready = _selector(DEPLOYMENT_READY, (NAMESPACE,))
    expr = f"max by (horizontalpodautoscaler) ({ready} * on (namespace, deployment) group_left (horizontalpodautoscaler) {join})"
    return _q(expr, "{{horizontalpodautoscaler}} ready")


def scaling_events() -> Query:
    """How often each HPA changed its desired replica count."""
    inner = f"changes({_selector(HPA_DESIRED, (NAMESPACE, HPA))}[{RATE}])"
    return _q(_agg("sum", ("horizontalpodautoscaler",), inner), "{{horizontalpodautoscaler}}")


def scaling_annotation() -> Query:
    """Instants at which a desired replica count changed (the dashboard's annotation)."""
    inner = f"changes({_selector(HPA_DESIRED, (NAMESPACE, HPA))}[{RATE}])"
    return _q(
        f"{_agg('sum', ('horizontalpodautoscaler',), inner)} > 0", "{{horizontalpodautoscaler}} rescaled"
    )


def _pending_gpu_pods() -> str:
    pending = _selector(POD_PHASE, (NAMESPACE, 'phase="Pending"'))
    gpus = _selector(POD_REQUESTS, (NAMESPACE, f'resource="{GPU_RESOURCE}"'))
    return f"({pending} == 1) and on (namespace, pod) ({gpus} > 0)"


def pending_gpu_pods() -> Query:
    """Pods stuck in Pending that request a GPU: a scale-up waiting for capacity."""
    return _q(_agg("count", ("namespace",), _pending_gpu_pods()), "{{namespace}} pending GPU pods")


def pending_gpus() -> Query:
    """GPUs those pods request."""
    pending = _selector(POD_PHASE, (NAMESPACE, 'phase="Pending"'))
    gpus = _selector(POD_REQUESTS, (NAMESPACE, f'resource="{GPU_RESOURCE}"'))
    return _q(f"sum({gpus} and on (namespace, pod) ({pending} == 1))", "GPUs requested by pending pods")


def queue_depth(dlq: bool) -> Query:
    """Messages per upstream queue or dead-letter queue, from the alerts' recording rules: the depth
    VLLMQueueBacklogNotDraining and VLLMDeadLetterQueue* compare with their thresholds."""
    return _q(
        _agg("sum", ("queue_name",), _selector(DLQ_DEPTH if dlq else QUEUE_DEPTH, (QUEUE,))), "{{queue_name}}"
    )


# --- GPU (DCGM exporter, scraped with honor_labels so namespace/pod name the GPU's workload) ---

GPU_LABELS: Final = ("namespace", "pod", "gpu")


def _per_gpu(family: vllm.Family) -> str:
    """A DCGM field per GPU of the selected namespaces and pods."""
    return _agg("max", GPU_LABELS, _series(family, (NAMESPACE, POD)))


def _with_model(per_gpu: str) -> str:
    """Keep the GPUs of selected vLLM pods and label them with the pod's model (`group` is 1)."""
    models = _agg("group", ("namespace", "pod", M), _series(VLLM_PRESENCE, VLLM))
    return f"{per_gpu} * on (namespace, pod) group_left ({M}) {models}"


def dcgm(family: vllm.Family) -> Query:
    return _q(_with_model(_per_gpu(family)), "{{pod}} GPU {{gpu}}")


def fb_used_ratio() -> Query:
    used, free = _per_gpu(FB_USED), _per_gpu(FB_FREE)
    return _q(_with_model(f"({used} / ({used} + {free}))"), "{{pod}} GPU {{gpu}}")


def throttled_gpus(bit: int, reason: str) -> Query:
    """GPUs whose clock-event bitmask has `bit` set: floor(x / bit) is odd exactly then."""
    return _q(f"sum(floor(({_with_model(_per_gpu(THROTTLE_REASONS))}) / {bit}) % 2)", reason)


# --- The adapter's own metrics ------------------------------------------------------------------

_TELEMETRY: Final = Telemetry()


def _name(metric: MetricWrapperBase) -> str:
    """The family name as exported (counters gain `_total` on their samples)."""
    family = next(iter(metric.describe()))
    return f"{family.name}_total" if family.type == "counter" else family.name


ADAPTER_REQUESTS: Final = _name(_TELEMETRY.requests)
ADAPTER_REQUEST_SECONDS: Final = _name(_TELEMETRY.request_seconds)
ADAPTER_ERRORS: Final = _name(_TELEMETRY.errors)
ADAPTER_UPSTREAM_SECONDS: Final = _name(_TELEMETRY.upstream_seconds)
ADAPTER_UPSTREAM_ERRORS: Final = _name(_TELEMETRY.upstream_errors)
ADAPTER_CACHE_HITS: Final = _name(_TELEMETRY.cache_hits)
ADAPTER_CACHE_MISSES: Final = _name(_TELEMETRY.cache_misses)
ADAPTER_CACHE_KEYS: Final = _name(_TELEMETRY.cache_keys)
ADAPTER_SAMPLE_AGE: Final = _name(_TELEMETRY.sample_age)
ADAPTER_HELD_AGE: Final = _TELEMETRY.held_sample_age.name
ADAPTER_READY: Final = _name(_TELEMETRY.ready)
ADAPTER_GRPC_CALLS: Final = _name(_TELEMETRY.grpc_calls)
ADAPTER_GRPC_SECONDS: Final = _name(_TELEMETRY.grpc_seconds)

#: the adapter answers 503 past this age by default (Prometheus source), so the panel turns red there
DEFAULT_MAX_AGE_SECONDS: Final = PrometheusSettings().max_age


def adapter_namespace_variable() -> Query:
    return label_values((ADAPTER_READY,), "namespace")


def adapter_pod_variable() -> Query:
    return label_values((ADAPTER_READY,), "pod", (NAMESPACE,))


def adapter_metric_variable() -> Query:
    return label_values((ADAPTER_REQUESTS,), "metric", (NAMESPACE,))


def _adapter_rate(name: str, labels: Sequence[str], extra: Sequence[str] = ()) -> str:
    return _agg("sum", labels, f"rate({_selector(name, (*ADAPTER, *extra))}[{RATE}])")


def adapter_requests(labels: Sequence[str]) -> Query:
    return _q(_adapter_rate(ADAPTER_REQUESTS, labels, (ADAPTER_METRIC,)), _legend(labels))


def adapter_error_ratio() -> Query:
    """Share of external-metrics answers that were not 2xx (the HPA freezes on those)."""
    failed = _adapter_rate(ADAPTER_REQUESTS, (), (ADAPTER_METRIC, 'code!~"2.."'))
    total = _adapter_rate(ADAPTER_REQUESTS, (), (ADAPTER_METRIC,))
    return _q(f"{failed} / {total}", "non-2xx share")


def adapter_errors() -> Query:
    return _q(_adapter_rate(ADAPTER_ERRORS, ("metric", "reason"), (ADAPTER_METRIC,)), "{{metric}} {{reason}}")


def _adapter_quantile(name: str, q: float, labels: Sequence[str], extra: Sequence[str] = ()) -> str:
    buckets = _adapter_rate(f"{name}_bucket", ("le", *labels), extra)
    return f"histogram_quantile({q:g}, {buckets})"


def adapter_latency(q: float) -> Query:
    expr = _adapter_quantile(ADAPTER_REQUEST_SECONDS, q, (), (ADAPTER_METRIC,))
    return _q(expr, f"p{q * 100:g}")


def grpc_calls() -> Query:
    """KEDA external scaler calls per second by gRPC method and status code."""
    return _q(_adapter_rate(ADAPTER_GRPC_CALLS, ("method", "code")), "{{method}} {{code}}")


def grpc_latency(q: float) -> Query:
    return _q(_adapter_quantile(ADAPTER_GRPC_SECONDS, q, ("method",)), f"{{{{method}}}} p{q * 100:g}")


def upstream_latency(q: float) -> Query:
    return _q(_adapter_quantile(ADAPTER_UPSTREAM_SECONDS, q, ("source",)), f"{{{{source}}}} p{q * 100:g}")


def upstream_errors() -> Query:
    return _q(_adapter_rate(ADAPTER_UPSTREAM_ERRORS, ("source", "outcome")), "{{source}} {{outcome}}")


def cache_hit_ratio() -> Query:
    hits = _adapter_rate(ADAPTER_CACHE_HITS, ())
    misses = _adapter_rate(ADAPTER_CACHE_MISSES, ())
    return _q(f"{hits} / ({hits} + {misses})", "hit ratio")


def cache_keys() -> Query:
    return _q(_agg("sum", ("pod",), _selector(ADAPTER_CACHE_KEYS, ADAPTER)), "{{pod}} keys")


def served_age_quantile(q: float) -> Query:
    expr = _adapter_quantile(ADAPTER_SAMPLE_AGE, q, ("metric",), (ADAPTER_METRIC,))
    return _q(expr, f"{{{{metric}}}} p{q * 100:g}")


def held_sample_age() -> Query:
    return _q(_agg("max", ("metric",), _selector(ADAPTER_HELD_AGE, (*ADAPTER, ADAPTER_METRIC))), "{{metric}}")


def adapter_ready() -> Query:
    return _q(f"sum({_selector(ADAPTER_READY, ADAPTER)})", "ready")


def adapter_replicas() -> Query:
    return _q(f"count({_selector(ADAPTER_READY, ADAPTER)})", "replicas")
