"""vLLM serving overview: is serving healthy, at a glance."""

from __future__ import annotations

from adapter.catalogue import builtin
from dashboards import panels as p
from dashboards import queries as q


def build() -> p.Dashboard:
    """The overview dashboard."""
    grid = p.Grid()
    grid.row("At a glance")
    grid.add(
        p.stat(
            "Finished requests/s",
            "Requests finished per second (all finish reasons).",
            [q.request_rate()],
            p.REQUESTS_PER_SECOND,
        ),
        4,
        4,
    )
    grid.add(
        p.stat(
            "In flight",
            "Running plus waiting requests over the selection: the adapter's vllm_requests_inflight.",
            [q.selection_value(builtin("vllm_requests_inflight"))],
            p.COUNT,
        ),
        4,
        4,
    )
    grid.add(
        p.stat(
            "KV cache usage",
            "Mean KV-cache usage (0-1) over the selected pods: the adapter's vllm_kv_cache_usage. It reaches "
            "~1.0 before any queue forms, so it signals 'near capacity' rather than 'overloaded'.",
            [q.selection_value(builtin("vllm_kv_cache_usage"))],
            p.RATIO,
            p.KV_LEVELS,
        ),
        4,
        4,
    )
    grid.add(
        p.stat(
            "TTFT p90",
            "90th percentile time to first token over 2 minutes: the adapter's vllm_ttft_seconds.",
            [q.selection_value(builtin("vllm_ttft_seconds"))],
            p.SECONDS,
            p.TTFT_LEVELS,
            links=[p.runbook("VLLMTTFTHigh")],
        ),
        4,
        4,
    )
    grid.add(
        p.stat(
            "TPOT mean",
            "Mean per-request time per output token over 2 minutes: the adapter's vllm_tpot_seconds.",
            [q.selection_value(builtin("vllm_tpot_seconds"))],
            p.SECONDS,
            p.TPOT_LEVELS,
            links=[p.runbook("VLLMTPOTDrift")],
        ),
        4,
        4,
    )
    grid.add(
        p.stat(
            "Serving pods",
            "vLLM pods exposing engine metrics, per model. A pod that serves but is missing here runs with "
            "--disable-log-stats or a vLLM that renamed its metrics.",
            [q.serving_pods()],
            p.COUNT,
            links=[p.runbook("VLLMNoReadyReplica"), p.runbook("VLLMMetricsMissing")],
        ),
        4,
        4,
    )

    grid.row("Traffic")
    grid.add(
        p.timeseries(
            "Finished requests by reason",
            "Finished requests per second by finish reason. vllm:request_success counts every finished "
            "request, aborts and errors included, despite its name.",
            [q.finished_requests()],
            p.REQUESTS_PER_SECOND,
            stacked=True,
            minimum=0,
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Aborted or failed",
            "Share of finished requests whose finish reason is abort or error.",
            [q.failed_ratio()],
            p.RATIO,
            p.FAILED_LEVELS,
            minimum=0,
            maximum=1,
            links=[p.runbook()],
        ),
        6,
    )
    grid.add(
        p.timeseries(
            "Admission rejections",
            "Requests refused with HTTP 503 by --max-num-queued-reqs / --max-num-queued-tokens, by reason. "
            "Zero unless those flags are set; absent on vLLM releases that predate the counter.",
            [q.admission_rejections()],
            p.REQUESTS_PER_SECOND,
            p.ANY_LEVELS,
            minimum=0,
            links=[p.runbook("VLLMRequestsRejected")],
        ),
        6,
    )

    grid.row("Load")
    grid.add(
        p.timeseries(
            "Running and waiting requests",
            "Requests in execution batches and requests waiting for a slot. Waiting grows at about "
            "(offered - capacity) per second once the fleet is saturated.",
            [q.running(), q.waiting()],
            p.COUNT,
            minimum=0,
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "KV cache usage",
            "Mean and max KV-cache usage per model (fraction 0-1).",
            [q.kv_usage("avg"), q.kv_usage("max")],
            p.RATIO,
            p.KV_LEVELS,
            minimum=0,
            maximum=1,
            links=[p.runbook("VLLMKVCacheNearlyFull")],
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "Preemptions",
            "Preemptions per second: sustained preemptions mean the KV cache is too small for the batch.",
            [q.preemptions()],
            p.PER_SECOND,
            p.ANY_LEVELS,
            minimum=0,
            links=[p.runbook("VLLMSustainedPreemptions")],
        ),
        8,
    )

    grid.row("Latency")
    grid.add(
        p.latency(
            "Time to first token",
            q.TTFT,
            p.TTFT_LEVELS,
            "Arrival to first token, queueing included.",
            "VLLMTTFTHigh",
        ),
        6,
    )
    grid.add(
        p.latency(
            "Time per output token",
            q.TPOT,
            p.TPOT_LEVELS,
            "Per-request decode time per generated token.",
            "VLLMTPOTDrift",
        ),
        6,
    )
    grid.add(p.latency("End-to-end latency", q.E2E, p.NO_THRESHOLD, "Arrival to last token."), 6)
    grid.add(
        p.latency(
            "Queue time", q.QUEUE_TIME, p.QUEUE_LEVELS, "Time spent waiting before the first schedule."
        ),
        6,
    )

    grid.row("Tokens and prefix cache")
    grid.add(
        p.timeseries(
            "Tokens per second",
            "Prompt tokens (cached ones included) and generated tokens per second.",
            [q.prompt_tokens(), q.generation_tokens()],
            p.TOKENS_PER_SECOND,
            minimum=0,
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Prefix-cache hit rate",
            "Cached prompt tokens / prompt tokens. Not hits / queries: under KV pressure vLLM looks waiting "
            "and preempted requests up again every step, inflating the query counter several times over.",
            [q.prefix_cache_hit_rate()],
            p.RATIO,
            minimum=0,
            maximum=1,
        ),
        12,
    )
    return p.build(
        p.OVERVIEW,
        "Is vLLM serving healthy: traffic, load, latency, tokens and the prefix cache, per model.",
        "overview",
        p.serving_variables(),
        grid,
    )


dashboard = build()
