"""vLLM's own series: load, traffic, tokens, latency histograms, and the catalogue as the HPA sees it.

Names, aliases and bucket bounds come from `adapter.vocabulary.vllm`. Wherever a panel shows a catalogue
metric (per model, per pod or over the selection) it is `adapter.vocabulary.promql.catalogue.value_query` of
that metric, the very query the adapter answers the HPA with, grouped as the panel needs. Every query
aggregates `engine` (the data-parallel rank) away; quantiles are shown only where the histogram's buckets
resolve them (`vllm-metrics.md` §8, `adapter.vocabulary.promql.resolved`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from prometheus_client.utils import floatToGoString

from adapter.vocabulary import vllm
from adapter.vocabulary.catalogue import MetricDef, SaturationSpec, builtin, saturation
from adapter.vocabulary.promql.catalogue import Divisors, served_query, value_query
from adapter.vocabulary.promql.catalogue import saturation as saturation_query
from adapter.vocabulary.promql.expressions import (
    aggregate,
    histogram_mean,
    histogram_quantile,
    rate,
    resolved,
    series,
)
from dashboards.queries.grafana import (
    BY_MODEL,
    BY_POD,
    MODEL,
    NAMESPACE,
    POD,
    RATE,
    M,
    Query,
    label_values,
    legend,
    query,
)


class HistogramFamily(NamedTuple):
    """A vLLM histogram family and the finite bucket bounds it is exposed with."""

    family: vllm.Family
    buckets: tuple[float, ...]


TTFT: Final = HistogramFamily(vllm.TTFT, vllm.TTFT_BUCKETS)
TPOT: Final = HistogramFamily(vllm.TPOT, vllm.INTER_TOKEN_LATENCY_BUCKETS)
ITL: Final = HistogramFamily(vllm.ITL, vllm.INTER_TOKEN_LATENCY_BUCKETS)
E2E: Final = HistogramFamily(vllm.E2E_LATENCY, vllm.REQUEST_LATENCY_BUCKETS)
QUEUE_TIME: Final = HistogramFamily(vllm.QUEUE_TIME, vllm.REQUEST_LATENCY_BUCKETS)
PREFILL: Final = HistogramFamily(vllm.PREFILL_TIME, vllm.REQUEST_LATENCY_BUCKETS)
DECODE: Final = HistogramFamily(vllm.DECODE_TIME, vllm.REQUEST_LATENCY_BUCKETS)

#: the vLLM pods the viewer selected
VLLM: Final = (NAMESPACE, MODEL, POD)
#: what an HPA selecting one model sees: every pod of the model, whatever `$pod` says
HPA_VIEW: Final = (NAMESPACE, MODEL)
#: the family every serving engine exposes from start-up: its series say which pods serve which model
PRESENCE: Final = vllm.NUM_REQUESTS_RUNNING

RUNNING: Final = builtin("vllm_requests_running")
WAITING: Final = builtin("vllm_requests_waiting")
INFLIGHT: Final = builtin("vllm_requests_inflight")
KV_USAGE: Final = builtin("vllm_kv_cache_usage")
TPOT_MEAN: Final = builtin("vllm_tpot_seconds")


# --- Variables -------------------------------------------------------------------------------------


def namespace_variable() -> Query:
    return label_values(PRESENCE[0], "namespace")


def model_variable() -> Query:
    return label_values(PRESENCE[0], M, (NAMESPACE,))


def pod_variable() -> Query:
    return label_values(PRESENCE[0], "pod", (NAMESPACE, MODEL))


def model_of_pods() -> str:
    """1 per selected vLLM pod, labelled with its model: `* on (namespace, pod) group_left` labels a
    per-pod series of another exporter with the model (and drops pods that serve none)."""
    return aggregate("group", ("namespace", "pod", M), series(PRESENCE, VLLM))


# --- Gauges ----------------------------------------------------------------------------------------


def catalogue_value(metric: MetricDef, labels: Sequence[str], suffix: str) -> Query:
    """A catalogue metric per group of the selection: its own query, grouped by `labels`."""
    return query(value_query(metric, VLLM, by=labels), legend(labels, suffix))


def running(labels: Sequence[str] = BY_MODEL) -> Query:
    return catalogue_value(RUNNING, labels, "running")


def waiting(labels: Sequence[str] = BY_MODEL) -> Query:
    return catalogue_value(WAITING, labels, "waiting")


def inflight_per_pod() -> Query:
    """Running plus waiting per pod: how evenly the load balancer spreads work."""
    return catalogue_value(INFLIGHT, BY_POD, "")


def kv_mean(labels: Sequence[str] = BY_MODEL) -> Query:
    return catalogue_value(KV_USAGE, labels, "avg")


def kv_max(labels: Sequence[str] = BY_MODEL) -> Query:
    """The fullest engine of each group: one engine out of blocks preempts, whatever the mean says."""
    return query(aggregate("max", labels, series(vllm.KV_CACHE_USAGE, VLLM)), legend(labels, "max"))


def waiting_by_reason() -> Query:
    labels = (M, "reason")
    return query(aggregate("sum", labels, series(vllm.WAITING_BY_REASON, VLLM)), legend(labels, "waiting"))


def serving_pods() -> Query:
    """vLLM pods currently exposing engine metrics, per model."""
    return query(aggregate("count", BY_MODEL, model_of_pods()), "{{model_name}} pods")


def kv_cache_config() -> Query:
    """KV-cache size per pod, labelled with its model (cache_config_info has no model_name).

    Only labels that exist in every release are kept (`vllm-metrics.md` §2.1); `max by` folds engines.
    """
    info = aggregate(
        "max",
        ("namespace", "pod", "num_gpu_blocks", "block_size"),
        series(vllm.CACHE_CONFIG_INFO, (NAMESPACE, POD)),
    )
    expr = f"{info} * on (namespace, pod) group_left ({M}) {model_of_pods()}"
    return query(expr, instant=True, table=True)


# --- Counters --------------------------------------------------------------------------------------


def _per_second(family: vllm.Family, labels: Sequence[str], matchers: Sequence[str] = VLLM) -> str:
    """Per-second increase summed by `labels` (counters are never zero at start: always a rate)."""
    return aggregate("sum", labels, rate(family, RATE, matchers))


def counter_rate(family: vllm.Family, labels: Sequence[str], suffix: str = "") -> Query:
    return query(_per_second(family, labels), legend(labels, suffix))


def finished_requests() -> Query:
    """Finished requests per second; `request_success` counts aborts and errors too (§3)."""
    return counter_rate(vllm.REQUEST_SUCCESS, (M, "finished_reason"))


def request_rate() -> Query:
    return query(_per_second(vllm.REQUEST_SUCCESS, ()), "requests/s")


def failed_ratio() -> Query:
    """Share of finished requests that were aborted or failed."""
    failed = _per_second(vllm.REQUEST_SUCCESS, BY_MODEL, (*VLLM, 'finished_reason=~"abort|error"'))
    total = _per_second(vllm.REQUEST_SUCCESS, BY_MODEL)
    return query(f"{failed} / {total}", "{{model_name}} aborted or failed")


def admission_rejections() -> Query:
    """HTTP 503s from `--max-num-queued-reqs/-tokens` (this counter has no `engine` label)."""
    return counter_rate(vllm.ADMISSION_REJECTIONS, (M, "reason"), "rejected")


def prompt_tokens() -> Query:
    return counter_rate(vllm.PROMPT_TOKENS, BY_MODEL, "prompt")


def generation_tokens() -> Query:
    return counter_rate(vllm.GENERATION_TOKENS, BY_MODEL, "generation")


def preemptions(labels: Sequence[str] = BY_MODEL) -> Query:
    return counter_rate(vllm.NUM_PREEMPTIONS, labels, "preemptions")


def prefix_cache_hit_rate(labels: Sequence[str] = BY_MODEL) -> Query:
    """Cached prompt tokens ÷ prompt tokens.

    Never hits ÷ `prefix_cache_queries`: under KV pressure waiting and preempted requests are looked
    up again on every step, inflating queries 4-11× on a real server (`vllm-metrics.md` §8).
    """
    cached = _per_second(vllm.PROMPT_TOKENS_CACHED, labels)
    total = _per_second(vllm.PROMPT_TOKENS, labels)
    return query(f"{cached} / {total}", legend(labels, "hit rate"))


# --- Histograms ------------------------------------------------------------------------------------


def mean(h: HistogramFamily) -> Query:
    """Δsum/Δcount per model: always resolved, whatever the buckets."""
    return query(histogram_mean(h.family, RATE, VLLM, BY_MODEL), legend(BY_MODEL, "mean"))


def tpot_mean_per_pod() -> Query:
    """The catalogue's TPOT mean (its window) per pod: one slow pod points at its GPU or node."""
    return catalogue_value(TPOT_MEAN, BY_POD, "mean")


def quantile(h: HistogramFamily, q: float) -> Query:
    """A quantile per model, dropped wherever it lies in the first bucket or past the last finite one.

    There `histogram_quantile` interpolates from nothing: a fast model's TPOT p90 read ~9 ms at every
    load while the true mean moved from 1.7 to 3.3 ms (`vllm-metrics.md` §8), the same rule as
    `catalogue.checked_value`. A gap in the line means "unresolved", never "zero".
    """
    expr = resolved(histogram_quantile(q, h.family, RATE, VLLM, BY_MODEL), h.buckets)
    return query(expr, legend(BY_MODEL, f"p{q * 100:g}"))


def first_bucket_share(h: HistogramFamily) -> Query:
    """Share of observations in the first bucket; near 1, quantiles of this histogram say nothing."""
    # vLLM's client renders `le` with floatToGoString ("0.01", "1.0"); match its text exactly.
    le = f'le="{floatToGoString(h.buckets[0])}"'  # type: ignore[no-untyped-call]
    first = aggregate("sum", BY_MODEL, rate(h.family, RATE, (*VLLM, le), suffix="_bucket"))
    count = aggregate("sum", BY_MODEL, rate(h.family, RATE, VLLM, suffix="_count"))
    return query(f"{first} / {count}", legend(BY_MODEL, f"≤ {h.buckets[0]:g} s"))


# --- The catalogue as the HPA sees it --------------------------------------------------------------


def served(metric: MetricDef) -> Query:
    """Exactly the query the adapter's Prometheus source answers the HPA with (one model), without the
    values it would refuse (`adapter.vocabulary.promql.catalogue.served_query`)."""
    return query(served_query(metric, HPA_VIEW), "served by the adapter")


def served_per_pod(metric: MetricDef) -> Query:
    """The served value ÷ serving pods: what an AverageValue target is compared with."""
    pods = aggregate("count", (), aggregate("group", BY_POD, series(PRESENCE, HPA_VIEW)))
    return query(f"({value_query(metric, HPA_VIEW)}) / {pods}", "served ÷ pods")


#: the Grafana variables holding the adapter's `metrics.vllm_saturation` parameters
SATURATION_VARIABLES: Final = Divisors("$capacity", "$kv_target", "$queue_target")
#: `vllm_saturation` with all three terms; `SATURATION_VARIABLES` stand in for its numbers
SATURATION: Final = saturation(1.0, 1.0, 1.0)


def saturation_value(by: Sequence[str] = (), legend_text: str = "served by the adapter") -> Query:
    """`vllm_saturation` as the adapter computes it for one model, its parameters from the variables
    (`Inf` leaves a term out, as leaving its key unset does); per pod with `by=BY_POD`."""
    spec = SATURATION.spec
    assert isinstance(spec, SaturationSpec)
    return query(saturation_query(spec, HPA_VIEW, by, SATURATION_VARIABLES), legend_text)


def selection_value(metric: MetricDef) -> Query:
    """A catalogue metric over the viewer's whole selection (pods included), as the adapter would serve it."""
    return query(served_query(metric, VLLM), metric.name)
