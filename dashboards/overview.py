"""vLLM serving overview: is serving healthy, at a glance."""

from __future__ import annotations

from adapter.vocabulary import vllm
from adapter.vocabulary.catalogue import builtin
from dashboards import layout
from dashboards import panels as p
from dashboards.layout import Row
from dashboards.queries import gateway as g
from dashboards.queries import vllm_engine as v


def at_a_glance() -> Row:
    return Row(
        "At a glance",
        [
            p.stat(
                "Finished requests/s",
                "Requests finished per second (all finish reasons).",
                [v.request_rate()],
                p.REQUESTS_PER_SECOND,
                width=4,
            ),
            p.stat(
                "In flight",
                "Running plus waiting requests over the selection: the adapter's vllm_requests_inflight.",
                [v.selection_value(builtin("vllm_requests_inflight"))],
                p.COUNT,
                width=4,
            ),
            p.stat(
                "KV cache usage",
                "Mean KV-cache usage (0-1) over the selected pods: the adapter's vllm_kv_cache_usage. It "
                "reaches ~1.0 before any queue forms, so it "
                "signals 'near capacity' rather than 'overloaded'.",
                [v.selection_value(builtin("vllm_kv_cache_usage"))],
                p.RATIO,
                p.KV_LEVELS,
                width=4,
            ),
            p.stat(
                "TTFT p90",
                "90th percentile time to first token over 2 minutes: the adapter's vllm_ttft_seconds.",
                [v.selection_value(builtin("vllm_ttft_seconds"))],
                p.SECONDS,
                p.TTFT_LEVELS,
                links=[p.runbook("VLLMTTFTHigh")],
                width=4,
            ),
            p.stat(
                "TPOT mean",
                "Mean per-request time per output token over 2 minutes: the adapter's vllm_tpot_seconds.",
                [v.selection_value(builtin("vllm_tpot_seconds"))],
                p.SECONDS,
                p.TPOT_LEVELS,
                links=[p.runbook("VLLMTPOTDrift")],
                width=4,
            ),
            p.stat(
                "Serving pods",
                "vLLM pods exposing engine metrics, per model. A pod that serves but is missing here runs "
                "with --disable-log-stats or a vLLM that renamed its metrics.",
                [v.serving_pods()],
                p.COUNT,
                links=[p.runbook("VLLMNoReadyReplica"), p.runbook("VLLMMetricsMissing")],
                width=4,
            ),
        ],
    )


def traffic() -> Row:
    return Row(
        "Traffic",
        [
            p.timeseries(
                "Finished requests by reason",
                "Finished requests per second by finish reason. "
                f"{vllm.REQUEST_SUCCESS[0]} counts every finished "
                "request, aborts and errors included, despite its name.",
                [v.finished_requests()],
                p.REQUESTS_PER_SECOND,
                stacked=True,
                width=12,
            ),
            p.timeseries(
                "Aborted or failed",
                "Share of finished requests whose finish reason is abort or error.",
                [v.failed_ratio()],
                p.RATIO,
                p.FAILED_LEVELS,
                maximum=1,
                links=[p.runbook()],
                width=6,
            ),
            p.timeseries(
                "Admission rejections",
                "Requests refused with HTTP 503 by --max-num-queued-reqs / --max-num-queued-tokens, by "
                "reason. Zero unless those flags are set; absent on vLLM releases that predate the counter.",
                [v.admission_rejections()],
                p.REQUESTS_PER_SECOND,
                p.ANY_LEVELS,
                links=[p.runbook("VLLMRequestsRejected")],
                width=6,
            ),
        ],
    )


def load() -> Row:
    return Row(
        "Load",
        [
            p.timeseries(
                "Running and waiting requests",
                "Requests in execution batches and requests waiting for a slot. Waiting grows at about "
                "(offered - capacity) per second once the fleet is saturated.",
                [v.running(), v.waiting()],
                p.COUNT,
                width=8,
            ),
            p.timeseries(
                "KV cache usage",
                "Mean and max KV-cache usage per model (fraction 0-1).",
                [v.kv_mean(), v.kv_max()],
                p.RATIO,
                p.KV_LEVELS,
                maximum=1,
                links=[p.runbook("VLLMKVCacheNearlyFull")],
                width=8,
            ),
            p.timeseries(
                "Preemptions",
                "Preemptions per second: sustained preemptions mean the KV cache is too small for the batch.",
                [v.preemptions()],
                p.PER_SECOND,
                p.ANY_LEVELS,
                links=[p.runbook("VLLMSustainedPreemptions")],
                width=8,
            ),
        ],
    )


def latency() -> Row:
    return Row(
        "Latency",
        [
            p.ttft_latency(width=6),
            p.latency(
                "Time per output token",
                v.TPOT,
                p.TPOT_LEVELS,
                "Per-request decode time per generated token.",
                "VLLMTPOTDrift",
                width=6,
            ),
            p.e2e_latency(width=6),
            p.latency(
                "Queue time",
                v.QUEUE_TIME,
                p.QUEUE_LEVELS,
                "Time spent waiting before the first schedule.",
                width=6,
            ),
        ],
    )


def tokens() -> Row:
    return Row(
        "Tokens and prefix cache",
        [
            p.timeseries(
                "Tokens per second",
                "Prompt tokens (cached ones included) and generated tokens per second.",
                [v.prompt_tokens(), v.generation_tokens()],
                p.TOKENS_PER_SECOND,
                width=12,
            ),
            p.timeseries(
                "Prefix-cache hit rate",
                "Cached prompt tokens / prompt tokens. Not hits / queries: under KV pressure vLLM looks "
                "waiting and preempted requests up again every step, inflating the query counter several "
                "times over.",
                [v.prefix_cache_hit_rate()],
                p.RATIO,
                maximum=1,
                width=12,
            ),
        ],
    )


def gateway() -> Row:
    return Row(
        "Inference gateway",
        [
            p.timeseries(
                "Gateway queue",
                "Requests held in the endpoint picker's flow-control queue (llm-d router / Gateway API "
                "inference extension), per pool and priority: they wait before any vLLM pod counts them, so "
                "vLLM's waiting requests stay low meanwhile. Empty without a gateway with flow control.",
                [g.queue_size()],
                p.COUNT,
                p.GATEWAY_QUEUE_LEVELS,
                links=[p.runbook("VLLMGatewayQueueBacklog")],
                width=8,
            ),
            p.timeseries(
                "Requests through the gateway",
                "Requests in flight through the endpoint picker, per model: what users have sent and not "
                "yet received, wherever they wait.",
                [g.requests_running()],
                p.COUNT,
                width=8,
            ),
            p.timeseries(
                "Gateway pool saturation",
                "The saturation flow control dispatches on (1.0: the set point; above it requests queue). "
                "Pinned at exactly 1.0 can mean stale pod metrics rather than load.",
                [g.pool_saturation()],
                p.PLAIN,
                p.SATURATION_LEVELS,
                width=8,
            ),
        ],
    )


def build() -> p.Dashboard:
    """The overview dashboard."""
    return layout.build(
        layout.OVERVIEW,
        "Is vLLM serving healthy: traffic, load, latency, tokens and the prefix cache, per model.",
        "overview",
        layout.serving_variables(),
        [at_a_glance(), traffic(), load(), latency(), tokens(), gateway()],
    )


dashboard = build()
