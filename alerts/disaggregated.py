"""Alerts on a disaggregated model (prefill and decode pools, helm/README.md "Prefill and decode apart").

A pool is the model's pods whose role label (`llm-d.ai/role`, carried by Prometheus as `llm_d_ai_role`:
the chart's monitors copy it from the pods) has the role's value. Aggregated models carry no role label,
so these rules return nothing for them.

- The prefill backlog, as Prometheus can see it: requests waiting on the prefill pool over the rate the
  pool finishes them (Little's law: the seconds its queue takes to clear at the current pace). The
  adapter serves the HPA its exact `vllm_prefill_backlog_seconds` (prompt tokens over the measured
  prefill throughput); this estimate is for alerting on a backlog that grows while the HPA is not
  catching up, not for scaling.
- Failed KV hand-overs: vLLM 0.26.0 exports no counter of failed transfers among its core metrics
  (/work/shared/vllm-metrics.md names the connectors' own `vllm:nixl_*` family, not its members). What
  it does export is where each prompt token came from, `vllm:prompt_tokens_by_source_total{source}`:
  on a decode engine the prompt arrives as `external_kv_transfer`, and a hand-over that fails is
  recomputed (vLLM's default `kv_load_failure_policy`) and counted as `local_compute`. A decode pool
  computing a large share of its prompts itself is a pool whose hand-overs fail.
"""

from __future__ import annotations

from typing import Final

from adapter.vocabulary import vllm
from adapter.vocabulary.promql.expressions import aggregate, rate, series
from alerts.contract import Alert, Recording
from alerts.params import ParamText
from alerts.recording import BY, LEVEL

#: the `source` values of `vllm.PROMPT_TOKENS_BY_SOURCE`: computed by this engine, and received through
#: the KV connector
LOCAL_COMPUTE: Final = "local_compute"
EXTERNAL_KV_TRANSFER: Final = "external_kv_transfer"

PREFILL_BACKLOG_RECORD: Final = f"{'_'.join(LEVEL)}:vllm_prefill_backlog_seconds:estimate5m"
DECODE_RECOMPUTE_SHARE_RECORD: Final = f"{'_'.join(LEVEL)}:vllm_decode_prompt_recomputed:ratio5m"
WINDOW: Final = "5m"


def _role(t: ParamText, value: str) -> str:
    return f'{t.role_label}="{value}", {t.vllm_selector}'


def recording_rules(t: ParamText) -> tuple[Recording, ...]:
    prefill, decode = _role(t, t.prefill_role), _role(t, t.decode_role)
    waiting = aggregate("sum", LEVEL, series(vllm.NUM_REQUESTS_WAITING, [prefill]))
    finished = aggregate("sum", LEVEL, rate(vllm.REQUEST_SUCCESS, WINDOW, [prefill]))
    local = aggregate(
        "sum", LEVEL, rate(vllm.PROMPT_TOKENS_BY_SOURCE, WINDOW, [decode, f'source="{LOCAL_COMPUTE}"'])
    )
    every = aggregate("sum", LEVEL, rate(vllm.PROMPT_TOKENS_BY_SOURCE, WINDOW, [decode]))
    return (
        Recording(PREFILL_BACKLOG_RECORD, f"{waiting} / {finished}"),
        Recording(DECODE_RECOMPUTE_SHARE_RECORD, f"{local} / {every}"),
    )


def alerts(t: ParamText) -> tuple[Alert, ...]:
    return (
        Alert(
            alert="VLLMPrefillBacklogGrowing",
            # +Inf: requests wait and the pool finishes none (a stalled pool), where deriv() is NaN.
            expr=(
                f"{PREFILL_BACKLOG_RECORD} > {t.prefill_backlog_seconds_threshold}\n"
                f"and on ({BY})\n  (deriv({PREFILL_BACKLOG_RECORD}[10m]) "
                f"> 0 or {PREFILL_BACKLOG_RECORD} == +Inf)"
            ),
            for_=t.prefill_backlog_for,
            severity="page",
            summary="The prefill pool of a disaggregated vLLM model has a backlog that keeps growing.",
            description=(
                "Requests waiting on the prefill pool of model {{ $labels.model_name }} in namespace "
                "{{ $labels.namespace }} take {{ $value | humanizeDuration }} to clear at its current pace "
                f"(threshold {t.prefill_backlog_seconds_threshold}s) and the backlog has grown for "
                f"{t.prefill_backlog_for}: every new request's TTFT includes it."
            ),
        ),
        Alert(
            alert="VLLMKVHandoverFailing",
            expr=f"{DECODE_RECOMPUTE_SHARE_RECORD} > {t.kv_recompute_share_threshold}",
            for_=t.kv_recompute_for,
            severity="ticket",
            summary=(
                "The decode pool of a disaggregated vLLM model recomputes prompts its KV hand-overs "
                "should bring."
            ),
            description=(
                "The decode pool of model {{ $labels.model_name }} in namespace {{ $labels.namespace }} "
                "computes {{ $value | humanizePercentage }} of its prompt tokens itself (threshold "
                f"{t.kv_recompute_share_threshold}) for {t.kv_recompute_for}: KV hand-overs from the "
                "prefill pool fail and are recomputed on decode."
            ),
        ),
    )
