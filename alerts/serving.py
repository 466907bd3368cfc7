"""Alerts on how one model serves: TPOT drift, TTFT SLO, KV-cache pressure, preemptions, rejections.

Each reads a recording rule of `alerts.recording` (or a per-model counter rate), so it is one series per
(namespace, model) whatever the number of pods and data-parallel engines behind it.
"""

from __future__ import annotations

from typing import Final

from adapter.vocabulary import vllm
from alerts.contract import Alert, Severity
from alerts.params import ParamText
from alerts.recording import (
    BY,
    KV_USAGE_RECORD,
    REQUEST_RATE_RECORD,
    TPOT_BASELINE_RECORD,
    TPOT_BASELINE_REQUESTS_RECORD,
    TPOT_RECORD,
    TTFT_RECORD,
    counter_rate,
)

# Counter rates for preemptions and rejections: long enough to hold several 30 s scrapes.
COUNTER_WINDOW: Final = "5m"


def _tpot_drift(t: ParamText, severity: Severity, ratio: str) -> Alert:
    return Alert(
        alert="VLLMTPOTDrift",
        expr=(
            f"(\n  {TPOT_RECORD}\n/\n  {TPOT_BASELINE_RECORD}\n) > {ratio}\n"
            f"and on ({BY})\n  {REQUEST_RATE_RECORD} >= {t.tpot_min_request_rate}\n"
            f"and on ({BY})\n  {TPOT_BASELINE_REQUESTS_RECORD} >= {t.tpot_min_baseline_requests}"
        ),
        for_=t.tpot_for,
        severity=severity,
        summary="Time per output token of a vLLM model has drifted above its own baseline.",
        description=(
            "Mean TPOT of model {{ $labels.model_name }} in namespace {{ $labels.namespace }} over the last "
            '10 minutes is {{ $value | printf "%.2f" }}× its baseline (its mean over the previous day, '
            f"excluding the last hour); the {severity} threshold is {ratio}×."
        ),
    )


def _rate_alert(
    name: str,
    family: vllm.Family,
    t: ParamText,
    threshold: str,
    for_: str,
    severity: Severity,
    summary: str,
    verb: str,
) -> Alert:
    """A per-model counter that keeps increasing for `for_`: `verb` says what each increment is."""
    return Alert(
        alert=name,
        expr=f"{counter_rate(family, COUNTER_WINDOW, t.vllm_selector)} > {threshold}",
        for_=for_,
        severity=severity,
        summary=summary,
        description=(
            "Model {{ $labels.model_name }} in namespace {{ $labels.namespace }} "
            f'{verb} {{{{ $value | printf "%.3g" }}}} requests/s (threshold {threshold}) for {for_}.'
        ),
    )


def alerts(t: ParamText) -> tuple[Alert, ...]:
    """The serving alerts, in the order of the runbook."""
    return (
        _tpot_drift(t, "ticket", t.tpot_ticket_ratio),
        _tpot_drift(t, "page", t.tpot_page_ratio),
        Alert(
            alert="VLLMTTFTHigh",
            expr=(
                f"{TTFT_RECORD} > {t.ttft_slo_seconds}\n"
                f"and on ({BY})\n  {REQUEST_RATE_RECORD} >= {t.ttft_min_request_rate}"
            ),
            for_=t.ttft_for,
            severity="page",
            summary="Time to first token of a vLLM model is above its SLO.",
            description=(
                "TTFT p90 of model {{ $labels.model_name }} in namespace {{ $labels.namespace }} is "
                f"{{{{ $value | humanizeDuration }}}} (SLO {t.ttft_slo_seconds}s) for {t.ttft_for}."
            ),
        ),
        Alert(
            alert="VLLMKVCacheNearlyFull",
            expr=f"{KV_USAGE_RECORD} > {t.kv_cache_usage_threshold}",
            for_=t.kv_cache_for,
            severity="ticket",
            summary="The KV cache of a vLLM model is nearly full.",
            description=(
                "Mean KV-cache usage of model {{ $labels.model_name }} in namespace {{ $labels.namespace }} "
                f"is {{{{ $value | humanizePercentage }}}} (threshold {t.kv_cache_usage_threshold}) "
                f"for {t.kv_cache_for}."
            ),
        ),
        _rate_alert(
            "VLLMSustainedPreemptions",
            vllm.NUM_PREEMPTIONS,
            t,
            t.preemption_rate_threshold,
            t.preemptions_for,
            "ticket",
            "A vLLM model keeps preempting requests for lack of KV-cache blocks.",
            "preempts",
        ),
        _rate_alert(
            "VLLMRequestsRejected",
            vllm.ADMISSION_REJECTIONS,
            t,
            t.admission_rejection_rate_threshold,
            t.admission_rejections_for,
            "page",
            "vLLM rejects requests with HTTP 503: its admission queue is full.",
            "rejects",
        ),
    )
