"""The parameters of the rules: one typed set with the shipped defaults, and their text.

Every tunable of `alerts.rules` (thresholds, `for:` durations, selectors, the DLQ and queue
expressions) is a field of `Params`, and in the chart the value `prometheusRule.params.<field>`. The
rules read a `ParamText`: each parameter already rendered as the text a rule carries, its value
(`plain_text`) or a Helm lookup (`alerts.generate`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Final

from adapter.vocabulary.exporters import SQS_VISIBLE
from adapter.vocabulary.promql.expressions import aggregate, selector

_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")

#: An SQS dead-letter queue by name (PromQL regexes are anchored): `-dlq`, `_dlq` or `.dlq` at the end,
#: in any case (`Orders-DLQ`), and FIFO queues, whose names must end in `.fifo` (`orders-dlq.fifo`).
#: The DLQ expression keeps these queues and the upstream-queue expression drops them, so a FIFO DLQ
#: never counts as a backlog. `[.]` rather than `\\.`: no backslash to escape through YAML and Helm.
DLQ_QUEUE_NAME: Final = "(?i).+[-_.]dlq([.]fifo)?"


@dataclass(frozen=True)
class Params:
    """Every tunable of the rules, with the shipped defaults.

    In the chart each field is the value `prometheusRule.params.<field>`. Durations are Prometheus
    durations (`15m`); selectors are PromQL label matchers without braces (`a="b", c=~"d.*"`).
    """

    vllm_selector: str = 'model_name!=""'
    """Matchers added to every vLLM engine series (all of them carry `model_name`)."""
    vllm_target_selector: str = 'job=~".*vllm.*"'
    """Matchers of the `up` series of vLLM scrape targets (adapter targets are recognised and left out)."""
    adapter_selector: str = 'job=~".*vllm-autoscale.*adapter.*"'
    """Matchers of the adapter's scrape targets (the chart's ServiceMonitor job is `<release>-adapter`)."""
    hpa_selector: str = 'horizontalpodautoscaler=~".*vllm.*"'
    """Matchers of the kube-state-metrics HPA series of the vLLM HPAs."""
    dlq_depth_expr: str = selector(SQS_VISIBLE, [f'queue_name=~"{DLQ_QUEUE_NAME}"'])
    """PromQL for the depth of each dead-letter queue, one series per queue (default: CloudWatch
    exporter SQS queues whose name ends in -dlq, _dlq or .dlq, in any case, FIFO ones included)."""
    queue_depth_expr: str = aggregate(
        "sum", ("namespace", "queue_name"), selector(SQS_VISIBLE, [f'queue_name!~"{DLQ_QUEUE_NAME}"'])
    )
    """PromQL for the depth of each upstream request queue; it must carry the `namespace` of the vLLM
    deployment that consumes it (use label_replace when the exporter runs elsewhere)."""

    tpot_ticket_ratio: float = 1.5
    """TPOT over its baseline above which a ticket is raised."""
    tpot_page_ratio: float = 2.0
    """TPOT over its baseline above which the on-call is paged."""
    tpot_min_request_rate: float = 0.1
    """Finished requests per second below which a model's TPOT is too noisy to alert on."""
    tpot_min_baseline_requests: float = 1000.0
    """TPOT observations the baseline day must hold, or the model has no baseline yet: a model
    deployed a few hours ago, or one whose day so far was a quiet warm-up (TPOT rises with batch size,
    so a baseline from a few lightly loaded minutes would make normal load look like drift)."""
    tpot_for: str = "15m"
    """How long TPOT must stay above a ratio."""
    ttft_slo_seconds: float = 2.0
    """TTFT p90 service-level objective, in seconds."""
    ttft_min_request_rate: float = 0.1
    """Finished requests per second below which TTFT p90 is not alerted on: over 2 minutes a handful of
    requests makes p90 the slowest one, and the alert would flap with every long prompt."""
    ttft_for: str = "10m"
    """How long TTFT p90 must stay above the SLO."""
    kv_cache_usage_threshold: float = 0.85
    """Mean KV-cache usage (fraction 0-1) above which the cache is nearly full."""
    kv_cache_for: str = "10m"
    """How long KV-cache usage must stay above the threshold."""
    preemption_rate_threshold: float = 0.0
    """Preemptions per second above which preemption counts as ongoing."""
    preemptions_for: str = "15m"
    """How long preemptions must go on."""
    admission_rejection_rate_threshold: float = 0.0
    """Rejected admissions (HTTP 503) per second above which rejections count as ongoing."""
    admission_rejections_for: str = "5m"
    """How long rejections must go on."""
    dlq_depth_threshold: float = 10.0
    """Messages in a dead-letter queue above which the on-call is paged."""
    dlq_depth_for: str = "5m"
    """How long the DLQ must stay above the threshold."""
    dlq_growth_for: str = "30m"
    """How long a DLQ must keep growing (higher than 30 minutes earlier) before a ticket."""
    queue_backlog_threshold: float = 100.0
    """Messages in an upstream queue above which a backlog must be draining."""
    queue_backlog_for: str = "5m"
    """How long a backlog may stay above the threshold without draining while replicas stay flat."""
    gateway_queue_threshold: float = 50.0
    """Requests held in an inference gateway pool's flow-control queue above which users are waiting
    where no vLLM metric shows it."""
    gateway_queue_for: str = "10m"
    """How long a gateway pool's queue may stay above the threshold (flow control queues short bursts
    by design)."""
    no_ready_replica_for: str = "15m"
    """How long requests may wait upstream while the vLLM workloads have no ready replica: the longest
    cold start (the chart's default `coldStartSeconds`, 600 s) plus 5 minutes for the autoscaler to react,
    a GPU node to join and the image to be pulled. The chart derives it from its models' largest
    `coldStartSeconds` unless this parameter is set."""
    hpa_max_for: str = "15m"
    """How long an HPA may run at its maximum replicas."""
    hpa_metrics_unavailable_for: str = "15m"
    """How long an HPA may be unable to compute its desired replicas."""
    adapter_down_for: str = "5m"
    """How long no adapter target may be up."""
    adapter_stale_seconds: float = 60.0
    """Age of a served sample, in seconds, above which the adapter serves stale data."""
    adapter_stale_for: str = "10m"
    """How long answers may be stale."""
    metrics_missing_for: str = "10m"
    """How long a running vLLM target may lack a metric the adapter needs."""
    role_label: str = "llm_d_ai_role"
    """Prometheus label carrying a disaggregated model's role (the pods' `llm-d.ai/role`, copied by the
    chart's monitors); the chart derives it from its models' `disaggregation.roleLabel` unless set."""
    prefill_role: str = "prefill"
    """Value of role_label on the prefill pool's series."""
    decode_role: str = "decode"
    """Value of role_label on the decode pool's series."""
    prefill_backlog_seconds_threshold: float = 5.0
    """Seconds the prefill pool's waiting requests take to clear, above which a growing backlog alerts
    (the chart's HPA target is 1 s: above 5 s and growing, scaling is not keeping up)."""
    prefill_backlog_for: str = "10m"
    """How long the prefill backlog must stay above the threshold and keep growing."""
    kv_recompute_share_threshold: float = 0.2
    """Share of a decode pool's prompt tokens it computes itself, above which KV hand-overs fail (a
    healthy pool receives all but about one token per request)."""
    kv_recompute_for: str = "10m"
    """How long the decode pool's recomputed share must stay above the threshold."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int) and not isinstance(value, bool) and f.type == "float":
                # `10` for a float parameter is fine; store it as the float it stands for.
                value = float(value)
                object.__setattr__(self, f.name, value)
            if f.name.endswith("_for") and not (isinstance(value, str) and _DURATION.match(value)):
                raise ValueError(
                    f"parameter {f.name!r} value {value!r} must be a Prometheus duration, e.g. 15m"
                )
            if isinstance(value, float) and (not math.isfinite(value) or value < 0):
                raise ValueError(f"parameter {f.name!r} value {value!r} must be a finite number >= 0")
            if isinstance(value, str) and ("\n" in value or not value.strip()):
                raise ValueError(f"parameter {f.name!r} value {value!r} must be one non-empty line")
        if not 1 < self.tpot_ticket_ratio <= self.tpot_page_ratio:
            raise ValueError(
                f"parameter 'tpot_ticket_ratio' value {self.tpot_ticket_ratio!r} must be above 1 and at "
                f"most tpot_page_ratio ({self.tpot_page_ratio!r})"
            )


def param_names() -> tuple[str, ...]:
    """The parameter names, in declaration order."""
    return tuple(f.name for f in fields(Params))


def go_number(value: float) -> str:
    """`value` as Go's `fmt` prints a float64 (`%v`), which is how Helm prints a number.

    The shortest digits that round-trip (as Python's `repr`), in exponent form when the decimal
    exponent is below -4 or at least 6 (`strconv.FormatFloat(v, 'g', -1, 64)`): 2.0 → "2",
    0.85 → "0.85", 1e6 → "1e+06". The plain rules file uses it so that it matches the chart byte for byte.
    """
    if not math.isfinite(value):
        raise ValueError(f"number {value!r} must be finite")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()[1:]
    assert isinstance(exponent, int)
    digits = "".join(str(d) for d in digits_tuple)
    point = len(digits) + exponent  # the decimal point sits after this many digits
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


class ParamText:
    """Each parameter as the text a rule carries; reading an unknown name raises `AttributeError`."""

    def __init__(self, texts: dict[str, str]) -> None:
        unknown = set(texts) ^ set(param_names())
        if unknown:
            raise ValueError(f"parameter texts {sorted(unknown)} must match the parameters of Params")
        self._texts = texts
        self.used: set[str] = set()

    def __getattr__(self, name: str) -> str:
        if name.startswith("_") or name not in self._texts:
            raise AttributeError(name)
        self.used.add(name)
        return self._texts[name]


def plain_text(params: Params) -> ParamText:
    """The parameters as literal text: numbers as Helm would print them, strings as they are."""
    texts: dict[str, str] = {}
    for name in param_names():
        value = getattr(params, name)
        texts[name] = go_number(value) if isinstance(value, float) else str(value)
    return ParamText(texts)
