"""Prefill and decode apart: a row per role of a disaggregated model, and the P:D ratio.

A role's series are the model's engine series with the role label the chart's monitors copy from the
pods (`llm_d_ai_role`, alerts.params' default `role_label`; an aggregated model has none, so its rows
stay empty). The prefill row shows what its autoscaler and TTFT answer to (backlog, prompt throughput,
TTFT), the decode row what bounds a decode engine (KV cache, running requests, TPOT), and the last row
the ratio of ready prefill to ready decode pods with the KV hand-over's health (fetches in flight by
stage, prompt tokens recomputed on decode).
"""

from __future__ import annotations

from typing import Final

import dashboards.queries.disaggregated as q
from adapter.vocabulary import vllm
from dashboards import layout
from dashboards import panels as p
from dashboards.layout import Row

_DEFAULTS: Final = p.ALERT_DEFAULTS
BACKLOG_LEVELS: Final = p.thresholds((1.0, "orange"), (_DEFAULTS.prefill_backlog_seconds_threshold, "red"))
RECOMPUTE_LEVELS: Final = p.thresholds((_DEFAULTS.kv_recompute_share_threshold, "red"))


def prefill_row() -> Row:
    return Row(
        "Prefill pool",
        [
            p.timeseries(
                "Prefill backlog",
                "Seconds the prefill pool's waiting requests take to clear at its current pace (the alerts' "
                "estimate; the HPA is served the adapter's exact vllm_prefill_backlog_seconds, target 1 s). "
                "It adds to every new request's TTFT.",
                [q.prefill_backlog()],
                p.SECONDS,
                BACKLOG_LEVELS,
                links=[p.runbook("VLLMPrefillBacklogGrowing")],
                width=8,
            ),
            p.timeseries(
                "Prompt throughput per prefill pod",
                "Prompt tokens per second each prefill engine processes: the pool's prefill rate through "
                "the P/D path, which the backlog is measured against.",
                [q.prompt_throughput()],
                p.TOKENS_PER_SECOND,
                width=8,
            ),
            p.timeseries(
                "TTFT by role",
                "Mean time to first token on the prefill engines (queue and prefill) and on the decode "
                "engines (what clients see: prefill, KV hand-over and the first decode step).",
                [q.role_mean(vllm.TTFT, q.PREFILL, "prefill"), q.role_mean(vllm.TTFT, q.DECODE, "decode")],
                p.SECONDS,
                p.TTFT_LEVELS,
                links=[p.runbook("VLLMTTFTHigh")],
                width=8,
            ),
        ],
    )


def decode_row() -> Row:
    return Row(
        "Decode pool",
        [
            p.timeseries(
                "KV cache usage per decode pod",
                "Max KV-cache usage of each decode engine (fraction 0-1): the decode pool's binding "
                "resource, and what it scales down on only as it drains.",
                [q.decode_gauge(vllm.KV_CACHE_USAGE, "max", "KV")],
                p.RATIO,
                p.KV_LEVELS,
                maximum=1,
                links=[p.runbook("VLLMKVCacheNearlyFull")],
                width=8,
            ),
            p.timeseries(
                "Running requests per decode pod",
                "Requests in each decode engine's batch; the decode HPA's second signal.",
                [q.decode_gauge(vllm.NUM_REQUESTS_RUNNING, "sum", "running")],
                p.COUNT,
                width=8,
            ),
            p.timeseries(
                "TPOT on decode",
                "Mean time per output token of the decode pool (the mean: its quantiles are often "
                "unresolved by vLLM's buckets).",
                [q.role_mean(vllm.TPOT, q.DECODE, "TPOT")],
                p.SECONDS,
                p.TPOT_LEVELS,
                links=[p.runbook("VLLMTPOTDrift")],
                width=8,
            ),
        ],
    )


def ratio_row() -> Row:
    return Row(
        "P:D ratio and KV hand-over",
        [
            p.timeseries(
                "P:D ratio",
                "Ready prefill pods over ready decode pods of each disaggregated model (its -prefill and "
                "-decode Deployments). The profile of the P/D pair says which ratio the workload needs.",
                [q.pd_ratio()],
                p.PLAIN,
                width=6,
            ),
            p.timeseries(
                "Ready pods by role",
                "Ready replicas of each role's Deployment.",
                [q.ready_pods("prefill"), q.ready_pods("decode")],
                p.COUNT,
                width=6,
            ),
            p.timeseries(
                "KV fetches in flight on decode",
                "Requests each decode pool is receiving KV for from the prefill pool, by stage: "
                "waiting_to_start (queued for the connector), in_progress (blocks in transfer), "
                "completed_waiting (KV arrived, waiting for a batch slot). The adapter serves their sum "
                "as vllm_kv_fetch_requests. A pile in the first two stages is a slow hand-over (network, "
                "connector); in the last, a full decode batch.",
                [q.kv_fetches()],
                p.COUNT,
                width=6,
            ),
            p.timeseries(
                "Prompt tokens recomputed on decode",
                "Share of the decode pool's prompt tokens it computed itself rather than received through "
                "the KV connector: hand-overs that failed.",
                [q.recomputed_share()],
                p.RATIO,
                RECOMPUTE_LEVELS,
                maximum=1,
                links=[p.runbook("VLLMKVHandoverFailing")],
                width=6,
            ),
        ],
    )


def build() -> p.Dashboard:
    return layout.build(
        layout.DISAGGREGATED,
        "Disaggregated models: the prefill pool, the decode pool, and the ratio between them.",
        "disaggregated",
        layout.serving_variables(),
        [prefill_row(), decode_row(), ratio_row()],
    )


dashboard = build()
