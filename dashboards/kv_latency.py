"""KV cache and latency drill-down: why a model is slow, per pod and per request phase."""

from __future__ import annotations

from dashboards import panels as p
from dashboards import queries as q


def build() -> p.Dashboard:
    """The KV-cache and latency dashboard."""
    grid = p.Grid()
    grid.row("KV cache")
    grid.add(
        p.timeseries(
            "KV cache usage per pod",
            "Max KV-cache usage over each pod's engines (fraction 0-1). Near 1.0 new requests wait for blocks "
            "and running ones get preempted.",
            [q.kv_usage("max", q.BY_POD)],
            p.RATIO,
            p.KV_LEVELS,
            minimum=0,
            maximum=1,
            links=[p.runbook("VLLMKVCacheNearlyFull")],
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Waiting requests by reason",
            "capacity: waiting for batch slots or KV blocks; deferred: held back by LoRA budget, KV transfer or a "
            "blocked status. Only capacity waits are helped by more replicas.",
            [q.waiting_by_reason()],
            p.COUNT,
            minimum=0,
            stacked=True,
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Preemptions per pod",
            "Preemptions per second: the KV cache ran out while requests were decoding. Lower --max-num-seqs or "
            "--max-model-len, or raise --gpu-memory-utilization.",
            [q.preemptions(q.BY_POD)],
            p.PER_SECOND,
            p.ANY_LEVELS,
            minimum=0,
            links=[p.runbook("VLLMSustainedPreemptions")],
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "Prefix-cache hit rate per pod",
            "Cached prompt tokens / prompt tokens per pod (never hits / queries, which inflate under KV pressure).",
            [q.prefix_cache_hit_rate(q.BY_POD)],
            p.RATIO,
            minimum=0,
            maximum=1,
        ),
        8,
    )
    grid.add(
        p.table(
            "KV cache size",
            "Blocks and block size per pod from vllm:cache_config_info (capacity in tokens = blocks x block size).",
            [q.kv_cache_config()],
            p.COUNT,
        ),
        8,
    )

    grid.row("Time to first token")
    grid.add(
        p.latency(
            "Time to first token",
            q.TTFT,
            p.TTFT_LEVELS,
            "Arrival to first token, queueing included.",
            "VLLMTTFTHigh",
        ),
        12,
    )
    grid.add(
        p.latency(
            "Queue time",
            q.QUEUE_TIME,
            p.QUEUE_LEVELS,
            "Waiting before the first schedule; under overload it is nearly all of TTFT.",
        ),
        12,
    )

    grid.row("Decode")
    grid.add(
        p.latency(
            "Time per output token",
            q.TPOT,
            p.TPOT_LEVELS,
            "Per-request decode time per generated token; it rises with batch size.",
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "TPOT mean per pod",
            "Mean per-request time per output token per pod: one slow pod points at its GPU or node.",
            [q.mean(q.TPOT, q.BY_POD)],
            p.SECONDS,
            p.TPOT_LEVELS,
            minimum=0,
            links=[p.runbook("VLLMTPOTDrift")],
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "TPOT in the first bucket",
            f"Share of requests whose TPOT is at most {q.TPOT.buckets[0]:g} s, the first bucket. Near 1, TPOT "
            "quantiles cannot be resolved from these buckets; read the mean.",
            [q.first_bucket_share(q.TPOT)],
            p.RATIO,
            minimum=0,
            maximum=1,
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "Inter-token latency",
            "Mean time between output events. With speculative decoding one event carries several tokens, so "
            "this is higher than the per-token latency.",
            [q.mean(q.ITL)],
            p.SECONDS,
            p.TPOT_LEVELS,
            minimum=0,
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "Inter-token latency in the first bucket",
            f"Share of inter-token gaps of at most {q.ITL.buckets[0]:g} s.",
            [q.first_bucket_share(q.ITL)],
            p.RATIO,
            minimum=0,
            maximum=1,
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "TPOT against its baseline",
            "Mean TPOT over the last 10 minutes / the model's own mean over the previous day (last hour left "
            f"out), from the alerts' recording rules: what VLLMTPOTDrift compares. A ticket above "
            f"{q.ALERT_DEFAULTS.tpot_ticket_ratio:g}x, a page above {q.ALERT_DEFAULTS.tpot_page_ratio:g}x "
            "(defaults), where the baseline holds at least "
            f"{q.ALERT_DEFAULTS.tpot_min_baseline_requests:g} requests and the model finishes at least "
            f"{q.ALERT_DEFAULTS.tpot_min_request_rate:g}/s. Per model; empty for a model younger than an hour, or "
            "without the alerts' rules.",
            [q.tpot_drift()],
            p.CODE,
            p.TPOT_DRIFT_LEVELS,
            minimum=0,
            links=[p.runbook("VLLMTPOTDrift")],
        ),
        8,
    )

    grid.row("Request phases")
    grid.add(p.latency("End-to-end latency", q.E2E, p.NO_THRESHOLD, "Arrival to last token."), 8)
    grid.add(
        p.timeseries(
            "Prefill time",
            "Mean time in the prefill phase per request; grows with prompt length.",
            [q.mean(q.PREFILL)],
            p.SECONDS,
            minimum=0,
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "Decode time",
            "Mean time in the decode phase per request; grows with output length and batch size.",
            [q.mean(q.DECODE)],
            p.SECONDS,
            minimum=0,
        ),
        8,
    )
    return p.build(
        p.KV_LATENCY,
        "Why a model is slow: KV-cache pressure, preemptions, and latency by request phase, per pod.",
        "kv_latency",
        p.serving_variables(),
        grid,
    )


dashboard = build()
