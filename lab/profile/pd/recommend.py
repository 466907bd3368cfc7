"""From a P/D pair's levels (`lab.profile.pd.measure`) to its profile: fits, knee, targets per role, P:D.

* **Prefill throughput**: the most prompt tokens per second the prefill engine finished at a level
  (saturated when its queue stood there: the capacity; else a lower bound, noted).
* **Decode knee**: TPOT = a + c x running fitted over the decode levels; the knee is the batch where
  it reaches the TPOT objective, no more than the engine ran (its slots) when its queue stood.
* **Targets**: the prefill pool's `vllm_prefill_backlog_seconds` Value is half the TTFT budget left
  after the unloaded TTFT through the pair (a request that finds the backlog at its target waits
  about that long; the other half covers the HPA's sync and a cold start of growth); the decode
  pool's `vllm_requests_running` AverageValue is the knee over 1.1 (the controller's tolerance) and
  `vllm_kv_cache_usage` Value the KV usage at that batch.
* **P:D**: prefill pods per decode pod = prompt tokens x a decode pod's requests per second at the
  knee (knee / (output tokens x TPOT at the knee)) / a prefill pod's throughput.
"""

from __future__ import annotations

import statistics
from fractions import Fraction

from lab.profile.pd.measure import Measured, PdSettings
from lab.profile.pd.schema import DecodeRole, PdProfile, PrefillRole
from lab.profile.schema import MetricTarget

BACKLOG = "vllm_prefill_backlog_seconds"
_TOLERANCE = 0.1


class PdProfileError(ValueError):
    """The levels do not determine a quantity; the message says which and why."""


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) by least squares; slope 0 through the mean with one batch size."""
    xs = {round(x, 3) for x, _ in points}
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    if len(xs) < 2:
        return mean_y, 0.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    slope = max(0.0, slope)
    return max(0.0, mean_y - slope * mean_x), slope


def ratio(x: float) -> tuple[int, int]:
    """The smallest whole P:D within 10 % of `x` prefill pods per decode pod (denominators to 8)."""
    for d in range(1, 9):
        p = max(1, round(x * d))
        if abs(p / d - x) <= 0.1 * x:
            return p, d
    near = Fraction(x).limit_denominator(8)
    return max(1, near.numerator), max(1, near.denominator)


def profile(settings: PdSettings, measured: Measured) -> PdProfile:
    """The P/D section; `PdProfileError` when a level the fits need is missing."""
    alone = measured.alone
    if alone is None or alone.client_ttft is None or alone.prefill.ttft is None or alone.decode.ttft is None:
        raise PdProfileError("the one-client level finished no request through the pair")
    if not measured.prefill or not measured.decode:
        raise PdProfileError("the budget ended before the prefill and decode levels ran")
    notes = list(measured.notes)
    prompt, output = settings.workload.prompt_tokens.mean, settings.workload.output_tokens.mean
    best = max(x.prefill.finished_per_second for x in measured.prefill)
    # Of the levels at the top rate (within the 5 % a level must add), the one whose queue stood most.
    top = max(
        (x for x in measured.prefill if x.prefill.finished_per_second >= best / 1.05),
        key=lambda x: x.prefill.waiting,
    )
    throughput = best * prompt
    saturated = top.prefill.waiting >= 1.0
    if not saturated:
        notes.append(
            f"the prefill engine's queue never stood (most {top.clients} clients): its throughput, "
            f"{throughput:.0f} tokens/s, is a lower bound"
        )
    prefill = PrefillRole(
        throughput,
        saturated,
        alone.prefill.ttft,
        max(x.prefill.running for x in measured.prefill),
        tuple(
            (x.clients, x.prefill.finished_per_second * prompt, x.prefill.waiting) for x in measured.prefill
        ),
    )
    points = [(x.decode.running, x.decode.tpot) for x in measured.decode if x.decode.tpot is not None]
    if not points:
        raise PdProfileError("no decode level measured a TPOT")
    base, slope = _line(points)
    slo = settings.slo
    slots = max(x.decode.running for x in measured.decode)
    runs = [x.decode.running for x in measured.decode]
    queued = len(runs) > 1 and runs[-1] < runs[-2] * 1.05  # the batch stopped growing: slots full
    by_tpot = (slo.tpot_seconds - base) / slope if slope > 0 else float("inf")
    if by_tpot <= slots:
        knee, bound = max(0.0, by_tpot), "tpot"
    else:
        knee, bound = slots, "slots" if queued else "levels"
    if knee <= 0:
        raise PdProfileError(
            f"one request alone decodes at {base * 1000:.3g} ms per token, past the TPOT objective"
        )
    kv = [x.decode.kv_usage / x.decode.running for x in measured.decode if x.decode.running > 0.5]
    kv_per_request = statistics.median(kv) if kv else 0.0
    decode = DecodeRole(
        base,
        slope,
        knee,
        base + slope * knee,
        bound,
        kv_per_request,
        slots,
        tuple(
            (x.clients, x.decode.running, x.decode.tpot or 0.0, x.decode.kv_usage) for x in measured.decode
        ),
    )
    handover = max(0.0, alone.decode.ttft - (alone.decode.tpot or 0.0))
    decode_rate = knee / (output * decode.knee_tpot_seconds)
    per_decode = prompt * decode_rate / throughput
    budget = slo.ttft_seconds - alone.client_ttft
    prefill_targets: dict[str, MetricTarget] = {}
    if budget > 0:
        prefill_targets[BACKLOG] = MetricTarget(
            "Value",
            round(budget / 2, 3),
            f"half the TTFT budget left after {alone.client_ttft * 1000:.0f} ms unloaded through the pair "
            f"({slo.ttft_seconds * 1000:.0f} ms objective): the other half covers the HPA's lag",
        )
    else:
        notes.append(
            f"one request alone takes {alone.client_ttft:.3g} s to its first token: past the TTFT objective"
        )
    running = round(knee / (1 + _TOLERANCE), 1)
    decode_targets = {
        "vllm_requests_running": MetricTarget(
            "AverageValue",
            running,
            f"the knee ({knee:.1f} running, bound by {bound}) over 1 + the HPA's tolerance",
        )
    }
    if kv_per_request > 0:
        decode_targets["vllm_kv_cache_usage"] = MetricTarget(
            "Value", round(min(0.95, kv_per_request * running), 3), f"KV usage at {running:g} running per pod"
        )
    return PdProfile(
        url=settings.url,
        prefill_url=settings.prefill_url,
        decode_url=settings.decode_url,
        prompt_tokens=prompt,
        output_tokens=output,
        slo_ttft_seconds=slo.ttft_seconds,
        slo_tpot_seconds=slo.tpot_seconds,
        prefill=prefill,
        decode=decode,
        handover_seconds=handover,
        unloaded_ttft_seconds=alone.client_ttft,
        prefill_per_decode=per_decode,
        ratio=ratio(per_decode),
        prefill_targets=prefill_targets,
        decode_targets=decode_targets,
        notes=tuple(notes),
    )


def summary(pd: PdProfile) -> str:
    """What is printed: the measurements, the targets, and where each number goes."""
    p, d = pd.prefill, pd.decode
    lines = [
        f"prefill through the pair: {p.throughput_tokens_per_second:.0f} prompt tokens/s per engine"
        f"{'' if p.saturated else ' (a lower bound: its queue never stood)'}; "
        f"a prompt alone {p.alone_seconds * 1000:.1f} ms",
        f"decode: TPOT {d.tpot_base_seconds * 1000:.2f} ms + "
        f"{d.tpot_per_request_seconds * 1000:.3f} ms x running; "
        f"knee {d.knee_running:.1f} running per engine (bound by "
        f"{d.knee_bound}), TPOT {d.knee_tpot_seconds * 1000:.1f} ms",
        f"KV hand-over: {pd.handover_seconds * 1000:.1f} ms; TTFT unloaded "
        f"through the pair {pd.unloaded_ttft_seconds * 1000:.1f} ms",
        f"P:D for {pd.prompt_tokens:g}-token prompts and {pd.output_tokens:g}-token outputs: "
        f"{pd.prefill_per_decode:.2f} prefill per decode engine, {pd.ratio[0]}:{pd.ratio[1]}",
    ]
    for role, targets in (("prefill", pd.prefill_targets), ("decode", pd.decode_targets)):
        for metric, t in targets.items():
            lines.append(f"{role} target: {metric} {t.type} {t.value:g}: {t.reasoning}")
    lines += [f"note: {n}" for n in pd.notes]
    lines.append(
        "adapter: metrics.vllm_prefill_backlog_seconds.prefill_throughput: "
        f"{p.throughput_tokens_per_second:.0f}; "
        f"chart: models[].disaggregation.prefillThroughput: {p.throughput_tokens_per_second:.0f}"
    )
    return "\n".join(lines)
