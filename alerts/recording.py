"""The recording rules: what several alerts and the dashboards share, each written once.

Per-model signals are the catalogue's own queries (`adapter.vocabulary.promql.catalogue.value_query`) grouped
by namespace and model, so a recorded series means what the HPA is served. Windows are not parameters: the
recording-rule names state them.
"""

from __future__ import annotations

from typing import Final

from adapter.vocabulary import catalogue, vllm
from adapter.vocabulary.catalogue import GaugeSpec, HistogramSpec, MetricDef, Statistic
from adapter.vocabulary.promql.catalogue import value_query
from adapter.vocabulary.promql.expressions import aggregate, duration, increase, rate
from alerts.contract import Recording
from alerts.params import ParamText

#: recording rules aggregate per model and namespace: the unit an HPA scales and an alert names
LEVEL: Final = ("namespace", vllm.MODEL_LABEL)
BY: Final = ", ".join(LEVEL)

# The TPOT drift compares a recent mean with the model's own mean over the previous day. The last hour
# is left out of the baseline so that a slow degradation does not raise its own baseline as it grows.
TPOT_WINDOW_SECONDS: Final = 600.0
TPOT_BASELINE_WINDOW_SECONDS: Final = 86400.0
TPOT_BASELINE_OFFSET_SECONDS: Final = 3600.0


def _recorded(metric: MetricDef, operation: str) -> str:
    """`namespace_model_name:<api name>:<operation>`, the recording-rule naming convention."""
    return f"{'_'.join(LEVEL)}:{metric.name}:{operation}"


def _operation(metric: MetricDef) -> str:
    spec = metric.spec
    if isinstance(spec, GaugeSpec):
        return spec.aggregation.value
    assert isinstance(spec, HistogramSpec)
    window = duration(spec.window_seconds)
    if spec.statistic is Statistic.MEAN:
        return f"mean{window}"
    return f"p{spec.quantile * 100:g}_{window}"


def _with_window(metric: MetricDef, seconds: float) -> MetricDef:
    spec = metric.spec
    assert isinstance(spec, HistogramSpec)
    return metric.with_overrides(
        spec=HistogramSpec(spec.family, spec.statistic, seconds, spec.quantile, spec.buckets)
    )


def counter_rate(family: vllm.Family, window: str, selector: str) -> str:
    """Per-model rate of a counter family (any of its names)."""
    return aggregate("sum", LEVEL, rate(family, window, [selector]))


def _baseline_requests(selector: str) -> str:
    """Per-model TPOT observations in the baseline window: how much the baseline mean stands on."""
    window = duration(TPOT_BASELINE_WINDOW_SECONDS)
    offset = duration(TPOT_BASELINE_OFFSET_SECONDS)
    return aggregate("sum", LEVEL, increase(vllm.TPOT, window, [selector], suffix="_count", offset=offset))


WAITING: Final = catalogue.builtin("vllm_requests_waiting")
RUNNING: Final = catalogue.builtin("vllm_requests_running")
KV_USAGE: Final = catalogue.builtin("vllm_kv_cache_usage")
TTFT: Final = catalogue.builtin("vllm_ttft_seconds")
TPOT_RECENT: Final = _with_window(catalogue.builtin("vllm_tpot_seconds"), TPOT_WINDOW_SECONDS)
TPOT_BASELINE: Final = _with_window(catalogue.builtin("vllm_tpot_seconds"), TPOT_BASELINE_WINDOW_SECONDS)

WAITING_RECORD: Final = _recorded(WAITING, _operation(WAITING))
RUNNING_RECORD: Final = _recorded(RUNNING, _operation(RUNNING))
KV_USAGE_RECORD: Final = _recorded(KV_USAGE, _operation(KV_USAGE))
TTFT_RECORD: Final = _recorded(TTFT, _operation(TTFT))
TPOT_RECORD: Final = _recorded(TPOT_RECENT, _operation(TPOT_RECENT))
_BASELINE_SUFFIX: Final = f"_offset{duration(TPOT_BASELINE_OFFSET_SECONDS)}"
TPOT_BASELINE_RECORD: Final = _recorded(TPOT_BASELINE, f"{_operation(TPOT_BASELINE)}{_BASELINE_SUFFIX}")
TPOT_BASELINE_REQUESTS_RECORD: Final = (
    f"{'_'.join(LEVEL)}:vllm_tpot_requests:increase{duration(TPOT_BASELINE_WINDOW_SECONDS)}{_BASELINE_SUFFIX}"
)
REQUEST_RATE_RECORD: Final = f"{'_'.join(LEVEL)}:vllm_request_success:rate{duration(TPOT_WINDOW_SECONDS)}"
QUEUE_RECORD: Final = "vllm_autoscale:queue_depth"
DLQ_RECORD: Final = "vllm_autoscale:dlq_depth"


def recording_rules(t: ParamText) -> tuple[Recording, ...]:
    """What several alerts and the dashboards share: per-model signals, request rate, queue depths."""
    sel = [t.vllm_selector]
    return (
        Recording(WAITING_RECORD, value_query(WAITING, sel, by=LEVEL)),
        Recording(RUNNING_RECORD, value_query(RUNNING, sel, by=LEVEL)),
        Recording(KV_USAGE_RECORD, value_query(KV_USAGE, sel, by=LEVEL)),
        Recording(TTFT_RECORD, value_query(TTFT, sel, by=LEVEL)),
        Recording(TPOT_RECORD, value_query(TPOT_RECENT, sel, by=LEVEL)),
        Recording(
            TPOT_BASELINE_RECORD,
            value_query(TPOT_BASELINE, sel, by=LEVEL, offset_seconds=TPOT_BASELINE_OFFSET_SECONDS),
        ),
        Recording(TPOT_BASELINE_REQUESTS_RECORD, _baseline_requests(t.vllm_selector)),
        Recording(
            REQUEST_RATE_RECORD,
            counter_rate(vllm.REQUEST_SUCCESS, duration(TPOT_WINDOW_SECONDS), t.vllm_selector),
        ),
        Recording(QUEUE_RECORD, t.queue_depth_expr),
        Recording(DLQ_RECORD, t.dlq_depth_expr),
    )
