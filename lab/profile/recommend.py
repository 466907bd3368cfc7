"""Recommended HPA targets for each catalogue metric, read off curves fitted to the measured steps.

One rule for all: a target is the value the metric shows when one replica carries `HEADROOM` of its
knee rate. The HPA ignores deviations within its 10 % tolerance, so a target at the knee itself
would let replicas run past it before any scale-up; 85 % scales before the knee and leaves a little
for the load that arrives while a new replica starts.

Each value comes from a monotone fit (`knee.isotonic`) over every open-loop step that held at or
below the knee, anchored at zero load and weighted by each step's window: a noisy step moves the
curve by its weight, never sets a target alone, and a target never falls as load rises. A metric
whose fitted curve does not rise with load over the measured range (flat, or already at its ceiling)
tells load levels apart nowhere there: it gets no target, with the reason. `vllm_saturation` takes
as divisors the fitted values at the knee of the metrics that still rise between `HEADROOM` of the
knee and the knee, so it reads below 1 at `HEADROOM` of the knee by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from lab.profile.knee import held, interpolate, isotonic, rate_steps
from lab.profile.schema import Knee, MetricTarget, Step

HEADROOM: Final = 0.85
INFLIGHT: Final = "vllm_requests_inflight"
WAITING: Final = "vllm_requests_waiting"
KV: Final = "vllm_kv_cache_usage"
SATURATION: Final = "vllm_saturation"
# KV usage this high at half the knee rate means the cache is full at every useful load (the
# KV-bound regime of vllm-metrics.md §8): its value no longer tells load levels apart.
_KV_FLAT: Final = 0.8
# A metric "rises with load" when its fitted value at the target's rate exceeds that at half the
# rate by this share: a curve flatter than that moves less than the HPA's own tolerance (10 %).
_RISE: Final = 0.1
# Below this the value is noise around zero (a queue that is empty nearly all the time).
_FLOOR: Final = {INFLIGHT: 0.05, WAITING: 0.05, KV: 0.005}


@dataclass(frozen=True)
class Curve:
    """One metric's fitted curve against the offered rate."""

    points: tuple[tuple[float, float], ...]

    def at(self, rate: float) -> float:
        return interpolate(self.points, rate)


def fitted(steps: Sequence[Step], knee_rate: float, value: Callable[[Step], float]) -> Curve:
    """The monotone fit of `value` over the held open-loop steps at or below `knee_rate`, from (0, 0)."""
    held_steps = [s for s in rate_steps(steps) if held(s) and s.offered_rate <= knee_rate]
    weights = [s.window_seconds or 1.0 for s in held_steps]
    anchor = max(weights, default=1.0)
    points = [
        (0.0, 0.0, anchor),
        *((s.offered_rate, value(s), w) for s, w in zip(held_steps, weights, strict=True)),
    ]
    return Curve(tuple(isotonic(points)))


def _flat_reason(name: str, curve: Curve, rate: float, knee_rate: float) -> str | None:
    """Why `name` cannot be a target (it does not rise with load), or `None` when it does."""
    value, half = curve.at(rate), curve.at(rate / 2)
    if name == KV and curve.at(knee_rate / 2) >= _KV_FLAT:  # checked first: the regime is the reason
        return (
            f"KV usage is already {curve.at(knee_rate / 2):.0%} at half the knee "
            f"({knee_rate / 2:.3g} req/s): here the cache is full at every useful load, "
            "so it cannot tell load levels apart; scale on in-flight requests or saturation instead"
        )
    if value < _FLOOR[name]:
        return (
            f"{name} stays at {value:.3g} at {HEADROOM:.0%} of the "
            f"knee ({rate:.3g} req/s): it does not rise with load "
            "below the knee, so no target there would tell load levels apart"
        )
    if value <= half * (1 + _RISE):
        return (
            f"{name} reads {half:.3g} at {rate / 2:.3g} req/s "
            f"and {value:.3g} at {rate:.3g} req/s: flat over the "
            "measured range, so it cannot tell load levels apart"
        )
    return None


def recommend(
    steps: Sequence[Step], knee: Knee
) -> tuple[dict[str, MetricTarget], dict[str, float], dict[str, str]]:
    """The targets by metric name, the `vllm_saturation` parameters they assume, and the metrics
    given no target with the reason."""
    rate = HEADROOM * knee.rate
    curves = {
        INFLIGHT: fitted(steps, knee.rate, lambda s: s.concurrency),
        WAITING: fitted(steps, knee.rate, lambda s: s.waiting),
        KV: fitted(steps, knee.rate, lambda s: s.kv_usage),
    }
    at = f"at {HEADROOM:.0%} of the knee ({rate:.3g} of {knee.rate:.3g} req/s per replica)"
    targets: dict[str, MetricTarget] = {}
    refused: dict[str, str] = {}
    for name, curve in curves.items():
        reason = _flat_reason(name, curve, rate, knee.rate)
        if reason is not None:
            refused[name] = reason
    value = {name: curve.at(rate) for name, curve in curves.items()}
    top = {name: curve.at(knee.rate) for name, curve in curves.items()}
    if INFLIGHT not in refused:
        targets[INFLIGHT] = MetricTarget(
            "AverageValue",
            round(value[INFLIGHT], 1),
            f"{value[INFLIGHT]:.1f} requests in flight per replica "
            f"{at} (a monotone fit over the measured steps); "
            f"{top[INFLIGHT]:.1f} at the knee. In-flight requests "
            "rise with load in both regimes (batch-bound and "
            "KV-bound): the default choice.",
        )
    if WAITING not in refused:
        # A target under one waiting request would turn a single queued request into a scale-up.
        floor = max(1.0, round(value[WAITING], 1))
        targets[WAITING] = MetricTarget(
            "AverageValue",
            floor,
            f"the queue averages {value[WAITING]:.2f} {at} and "
            f"{top[WAITING]:.2f} at the knee (at least 1): it stays "
            "near empty until a replica nears its knee, so it reacts "
            "late; use it beside in-flight requests, not alone.",
        )
    if KV not in refused:
        targets[KV] = MetricTarget(
            "Value",
            round(value[KV], 2),
            f"mean KV-cache usage {value[KV]:.0%} {at}; {top[KV]:.0%} at the knee.",
        )
    parameters = _saturation_parameters(curves, rate, knee.rate, refused)
    if "capacity" in parameters:
        saturation = _saturation(value, parameters)
        targets[SATURATION] = MetricTarget(
            "Value",
            round(saturation, 2),
            "with the parameters below (1.0 = a replica at "
            f"its knee) saturation reads {saturation:.2f} {at}; "
            "a target of 1.0 holds replicas at the knee itself, with "
            "no headroom for load that arrives during a cold start.",
        )
    else:
        parameters = {}
        refused[SATURATION] = (
            "in-flight requests do not rise between 85 % of the "
            "knee and the knee, so saturation has no capacity"
        )
    return targets, parameters, refused


def _saturation_parameters(
    curves: dict[str, Curve], rate: float, knee_rate: float, refused: dict[str, str]
) -> dict[str, float]:
    """`capacity` (fitted in flight at the knee), `queue_target` (the fitted queue at the knee, at
    least one request) and `kv_target` (fitted KV usage at the knee), each only for a metric that
    has a target and still rises between `rate` and the knee (so its term is below 1 at `rate`)."""
    keys = {INFLIGHT: "capacity", WAITING: "queue_target", KV: "kv_target"}
    parameters: dict[str, float] = {}
    for name, key in keys.items():
        top, value = curves[name].at(knee_rate), curves[name].at(rate)
        if name in refused or top <= value * 1.01:  # a 1 % rise survives rounding the divisor
            continue
        divisor = max(1.0, top) if name == WAITING else top
        parameters[key] = round(min(divisor, 1.0) if name == KV else divisor, 3)
    return parameters


def _saturation(value: dict[str, float], parameters: dict[str, float]) -> float:
    terms = {"capacity": INFLIGHT, "queue_target": WAITING, "kv_target": KV}
    return max(value[terms[key]] / divisor for key, divisor in parameters.items())


def config_snippet(parameters: dict[str, float]) -> str:
    """The adapter configuration that serves `vllm_saturation` with these parameters (YAML)."""
    lines = ["metrics:", "  vllm_saturation:"]
    lines += [
        f"    {key}: {parameters[key]:g}"
        for key in ("capacity", "kv_target", "queue_target")
        if key in parameters
    ]
    return "\n".join(lines) + "\n"
