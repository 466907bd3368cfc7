"""Recommended HPA targets for each catalogue metric, read off the measured curves, with the reasons.

One rule for all: a target is the value the metric shows when one replica carries `HEADROOM` of its
knee rate. The HPA ignores deviations within its 10 % tolerance, so a target at the knee itself
would let replicas run past it before any scale-up; 85 % scales before the knee and leaves a little
for the load that arrives while a new replica starts. The curves are interpolated between the
steps that held (and zero load), so a target is a measured state, never an extrapolation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from lab.profile.knee import held, interpolate, rate_steps
from lab.profile.schema import Knee, Step, Target

HEADROOM: Final = 0.85
INFLIGHT: Final = "vllm_requests_inflight"
WAITING: Final = "vllm_requests_waiting"
KV: Final = "vllm_kv_cache_usage"
SATURATION: Final = "vllm_saturation"
# KV usage this high at half the knee rate means the cache is full at every useful load (the
# KV-bound regime of vllm-metrics.md §8): its value no longer tells load levels apart.
_KV_FLAT: Final = 0.8


def _curve(steps: Sequence[Step], knee: Knee, value: Callable[[Step], float]) -> list[tuple[float, float]]:
    held_steps = [s for s in rate_steps(steps) if held(s) and s.offered_rate <= knee.rate]
    return [(0.0, 0.0), *((s.offered_rate, value(s)) for s in held_steps)]


def saturation_parameters(knee: Knee, knee_waiting: float) -> dict[str, float]:
    """`capacity` (in flight at the knee), `kv_target` (KV usage at the knee) and `queue_target` (the
    knee's queue, at least one request: below the knee the queue is near empty, and a target under
    one waiting request would turn a single queued request into a scale-up)."""
    parameters = {
        "capacity": max(0.1, round(knee.concurrency, 1)),
        "queue_target": max(1.0, round(knee_waiting, 1)),
    }
    kv_target = round(min(knee.kv_usage, 1.0), 2)
    if kv_target > 0:  # a KV cache that stays (near) empty at the knee says nothing about load
        parameters["kv_target"] = kv_target
    return parameters


def recommend(
    steps: Sequence[Step], knee: Knee, knee_waiting: float
) -> tuple[dict[str, Target], dict[str, float]]:
    """The targets by metric name, and the `vllm_saturation` parameters they assume."""
    rate = HEADROOM * knee.rate
    inflight = interpolate(_curve(steps, knee, lambda s: s.concurrency), rate)
    waiting = interpolate(_curve(steps, knee, lambda s: s.waiting), rate)
    kv_curve = _curve(steps, knee, lambda s: s.kv_usage)
    kv, kv_half = interpolate(kv_curve, rate), interpolate(kv_curve, knee.rate / 2)
    parameters = saturation_parameters(knee, knee_waiting)
    terms = [inflight / parameters["capacity"], waiting / parameters["queue_target"]]
    if "kv_target" in parameters:
        terms.append(kv / parameters["kv_target"])
    saturation = max(terms)
    at = f"at {HEADROOM:.0%} of the knee ({rate:.3g} of {knee.rate:.3g} req/s per replica)"
    kv_note = (
        f" KV usage is already {kv_half:.0%} at half the knee: here the cache is full at every useful load, so "
        "it cannot tell load levels apart; scale on in-flight requests or saturation instead."
        if kv_half >= _KV_FLAT
        else ""
    )
    targets = {
        INFLIGHT: Target(
            "AverageValue",
            round(inflight, 1),
            f"{inflight:.1f} requests in flight per replica {at}; {knee.concurrency:.1f} at the knee. "
            "In-flight requests rise with load in both regimes (batch-bound and KV-bound): the default choice.",
        ),
        WAITING: Target(
            "AverageValue",
            parameters["queue_target"],
            f"the queue averages {knee_waiting:.2f} at the knee and {waiting:.2f} {at}: it stays near empty "
            "until a replica is past its knee, so it reacts late; use it beside in-flight requests, not alone.",
        ),
        KV: Target(
            "Value",
            round(kv, 2),
            f"mean KV-cache usage {kv:.0%} {at}; {knee.kv_usage:.0%} at the knee.{kv_note}",
        ),
        SATURATION: Target(
            "Value",
            round(saturation, 2),
            f"with the parameters below (1.0 = a replica at its knee) saturation reads {saturation:.2f} {at}; "
            "a target of 1.0 holds replicas at the knee itself, with no headroom for load that arrives during a cold start.",
        ),
    }
    return targets, parameters


def config_snippet(parameters: dict[str, float]) -> str:
    """The adapter configuration that serves `vllm_saturation` with these parameters (YAML)."""
    lines = ["metrics:", "  vllm_saturation:"]
    lines += [
        f"    {key}: {parameters[key]:g}"
        for key in ("capacity", "kv_target", "queue_target")
        if key in parameters
    ]
    return "\n".join(lines) + "\n"
