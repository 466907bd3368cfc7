"""Replica schedules that need no HPA: the bounds every policy is measured against.

* **Foresight** knows the traffic: per tick the busiest 10 s within one cold start plus one sync
  ahead, sized at the knee for the SLO, so each replica is Ready when it is needed. It meets the SLO
  by construction (within min/max) and is the denominator of every cost ratio.
* **The reactive bound** knows only the present, at once: the last 10 s, held for the scale-down
  window. Where it misses the SLO, no signal of the present can meet it without standing headroom.
"""

from __future__ import annotations

import math
from collections import deque

from lab.backtest.calibration import ServiceModel
from lab.backtest.policy import Policy


def foresight_plan(
    policy: Policy, knee: float, arrivals: list[float], dt: float, *, ahead: bool = True
) -> list[int]:
    """Pods to have at each tick: what the busiest 10 s within the cold start and a sync ahead need at
    `knee` requests per second per replica (the knee for the SLO, never saturation: a fleet sized at
    saturation runs full batches whose TPOT misses the SLO), within min/max.

    With `ahead` false, the reactive bound instead: the most the last 10 s needed within the scale-down
    window (as the HPA keeps its highest recommendation), known at once (no pipeline lag, no
    tolerance), so new pods serve one cold start after the rise that asked for them: what any signal
    of the present can do without standing headroom."""
    n = len(arrivals)
    half = max(1, round(5 / dt))
    prefix = [0.0]
    for a in arrivals:
        prefix.append(prefix[-1] + a)
    need = []
    for k in range(n):
        lo, hi = (max(0, k - half), min(n, k + half)) if ahead else (max(0, k + 1 - 2 * half), k + 1)
        rate = (prefix[hi] - prefix[lo]) / ((hi - lo) * dt)
        need.append(math.ceil(rate / knee - 1e-9) if rate > 0 else 0)
    if not ahead:
        held = max(1, round(policy.downscale_stabilization / dt))
        return [_clamp(policy, x) for x in _sliding_max(need, held, forward=False)]
    ahead_ticks = max(1, round((policy.cold_start + policy.sync_period) / dt))
    return [_clamp(policy, x) for x in _sliding_max(need, ahead_ticks, forward=True)]


def foresight_knee(policy: Policy, model: ServiceModel, slo_tpot: float) -> float:
    """The per-replica rate foresight sizes against: the policy's knee, else the model's for the SLO."""
    return policy.knee_rate or model.knee_rate(slo_tpot)


def _clamp(policy: Policy, replicas: int) -> int:
    return min(policy.max_replicas, max(policy.min_replicas, replicas))


def _sliding_max(values: list[int], span: int, *, forward: bool) -> list[int]:
    """The maximum of `values` over [k, k + span] (forward) or [k - span, k] at every k."""
    n = len(values)
    out = [0] * n
    window: deque[int] = deque()
    order = range(n - 1, -1, -1) if forward else range(n)
    for k in order:
        while window and values[window[-1]] <= values[k]:
            window.pop()
        window.append(k)
        while window and abs(window[0] - k) > span:
            window.popleft()
        out[k] = values[window[0]]
    return out
