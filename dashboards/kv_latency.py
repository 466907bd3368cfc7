"""KV cache and latency drill-down: why a model is slow, per pod and per request phase."""

from __future__ import annotations

from adapter.vocabulary import vllm
from dashboards import layout
from dashboards import panels as p
from dashboards.layout import Row
from dashboards.queries import recorded
from dashboards.queries import vllm_engine as v
from dashboards.queries.grafana import BY_POD

_DRIFT = p.ALERT_DEFAULTS


def kv_cache() -> Row:
    return Row(
        "KV cache",
        [
            p.timeseries(
                "KV cache usage per pod",
                "Max KV-cache usage over each pod's engines (fraction 0-1). Near 1.0 new requests wait for "
                "blocks and running ones get preempted.",
                [v.kv_max(BY_POD)],
                p.RATIO,
                p.KV_LEVELS,
                maximum=1,
                links=[p.runbook("VLLMKVCacheNearlyFull")],
                width=12,
            ),
            p.timeseries(
                "Waiting requests by reason",
                "capacity: waiting for batch slots or KV blocks; deferred: held back by LoRA budget, KV "
                "transfer or a blocked status. Only capacity waits are helped by more replicas.",
                [v.waiting_by_reason()],
                p.COUNT,
                stacked=True,
                width=12,
            ),
            p.timeseries(
                "Preemptions per pod",
                "Preemptions per second: the KV cache ran out while requests were decoding. Lower "
                "--max-num-seqs or --max-model-len, or raise --gpu-memory-utilization.",
                [v.preemptions(BY_POD)],
                p.PER_SECOND,
                p.ANY_LEVELS,
                links=[p.runbook("VLLMSustainedPreemptions")],
                width=8,
            ),
            p.timeseries(
                "Prefix-cache hit rate per pod",
                "Cached prompt tokens / prompt tokens per pod (never hits / queries, which inflate under KV "
                "pressure).",
                [v.prefix_cache_hit_rate(BY_POD)],
                p.RATIO,
                maximum=1,
                width=8,
            ),
            p.table(
                "KV cache size",
                "Blocks and block size per pod from "
                f"{vllm.CACHE_CONFIG_INFO[0]} (capacity in tokens = blocks x "
                "block size).",
                [v.kv_cache_config()],
                p.COUNT,
                width=8,
            ),
        ],
    )


def time_to_first_token() -> Row:
    return Row(
        "Time to first token",
        [
            p.ttft_latency(width=12),
            p.latency(
                "Queue time",
                v.QUEUE_TIME,
                p.QUEUE_LEVELS,
                "Waiting before the first schedule; under overload it is nearly all of TTFT.",
                width=12,
            ),
        ],
    )


def first_bucket(title: str, what: str, h: v.HistogramFamily) -> p.Placed:
    """The share of a histogram's observations in its first bucket."""
    return p.timeseries(title, what, [v.first_bucket_share(h)], p.RATIO, maximum=1, width=8)


def decode() -> Row:
    return Row(
        "Decode",
        [
            p.latency(
                "Time per output token",
                v.TPOT,
                p.TPOT_LEVELS,
                "Per-request decode time per generated token; it rises with batch size.",
                width=8,
            ),
            p.timeseries(
                "TPOT mean per pod",
                "Mean per-request time per output token per pod, over the adapter's window (its "
                "vllm_tpot_seconds per pod): one slow pod points at its GPU or node.",
                [v.tpot_mean_per_pod()],
                p.SECONDS,
                p.TPOT_LEVELS,
                links=[p.runbook("VLLMTPOTDrift")],
                width=8,
            ),
            first_bucket(
                "TPOT in the first bucket",
                f"Share of requests whose TPOT is at most {v.TPOT.buckets[0]:g} s, the first bucket. Near 1, "
                "TPOT quantiles cannot be resolved from these buckets; read the mean.",
                v.TPOT,
            ),
            p.timeseries(
                "Inter-token latency",
                "Mean time between output events. With speculative decoding one event carries several "
                "tokens, so this is higher than the per-token latency.",
                [v.mean(v.ITL)],
                p.SECONDS,
                p.TPOT_LEVELS,
                width=8,
            ),
            first_bucket(
                "Inter-token latency in the first bucket",
                f"Share of inter-token gaps of at most {v.ITL.buckets[0]:g} s.",
                v.ITL,
            ),
            p.timeseries(
                "TPOT against its baseline",
                "Mean TPOT over the last 10 minutes / the model's own mean over the previous day (last hour "
                "left out), from the alerts' recording rules: what VLLMTPOTDrift compares. A ticket above "
                f"{_DRIFT.tpot_ticket_ratio:g}x, a page above {_DRIFT.tpot_page_ratio:g}x (defaults), where "
                f"the baseline holds at least {_DRIFT.tpot_min_baseline_requests:g} requests and the model "
                f"finishes at least {_DRIFT.tpot_min_request_rate:g}/s. Per model; empty for a model "
                "younger than an hour, or without the alerts' rules.",
                [recorded.tpot_drift()],
                p.CODE,
                p.TPOT_DRIFT_LEVELS,
                links=[p.runbook("VLLMTPOTDrift")],
                width=8,
            ),
        ],
    )


def request_phases() -> Row:
    return Row(
        "Request phases",
        [
            p.e2e_latency(width=8),
            p.timeseries(
                "Prefill time",
                "Mean time in the prefill phase per request; grows with prompt length.",
                [v.mean(v.PREFILL)],
                p.SECONDS,
                width=8,
            ),
            p.timeseries(
                "Decode time",
                "Mean time in the decode phase per request; grows with output length and batch size.",
                [v.mean(v.DECODE)],
                p.SECONDS,
                width=8,
            ),
        ],
    )


def build() -> p.Dashboard:
    """The KV-cache and latency dashboard."""
    return layout.build(
        layout.KV_LATENCY,
        "Why a model is slow: KV-cache pressure, preemptions, and latency by request phase, per pod.",
        "kv_latency",
        layout.serving_variables(),
        [kv_cache(), time_to_first_token(), decode(), request_phases()],
    )


dashboard = build()
