"""What the HPA reads: a metric's value as the adapter would serve it, from the fleet model's state.

`value_of` turns the fleet's state at a scrape (running and waiting requests summed over the pods,
the Ready pods) into each metric the fleet model knows; `Reader` gives a refresh's value: the state
at the scrape (the fleet's means, or with a `Sampler` the counts the scrape reads), averaged over the
policy's `smoothing` window of scrapes; `forecast` is `vllm_request_rate_forecast` from the arrivals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from lab.backtest.calibration import ServiceModel
from lab.backtest.fleet import Router
from lab.backtest.policy import DURABLE, Policy
from lab.backtest.sampling import Sampler

# DCGM_FI_DEV_GPU_UTIL is sampled over about a second.
_GPU_SAMPLE_SECONDS: Final = 1.0


def forecast(arrived: list[float], seen: int, dt: float, window: float, horizon: float) -> float:
    """`vllm_request_rate_forecast` at the end of tick `seen`: the arrival rate over the last `window`
    (prefix sums `arrived`), plus its trend (the change from the window before) carried `horizon`
    seconds ahead and half a window more (a windowed rate is half a window late). Never negative."""
    w = max(1, round(window / dt))
    end = seen + 1

    def rate(at: int) -> float:
        lo = max(0, at - w)
        return (arrived[at] - arrived[lo]) / (max(1, at - lo) * dt)

    now = rate(end)
    before = rate(end - w) if end - w > 0 else now
    trend = (now - before) / (w * dt)
    return max(0.0, now + trend * (horizon + w * dt / 2))


def value_of(
    metric: str, policy: Policy, model: ServiceModel, running: float, waiting: float, ready: int
) -> float | None:
    """`metric`'s value from the fleet's state (`vllm_request_rate_forecast` is read by `forecast`)."""
    if metric == "queue_depth":
        return waiting
    if ready == 0:
        return None
    batch = running / ready
    if metric == "vllm_requests_inflight":
        return running + waiting
    if metric == "vllm_requests_waiting":
        return waiting
    if metric == "vllm_requests_running":
        return running
    kv = min(1.0, batch * model.kv_per_request)
    if metric == "vllm_kv_cache_usage":
        return kv
    if metric == "gpu_utilization":
        # DCGM's busy fraction is the share of each 1 s sample with a kernel running: idle only when
        # no request is in flight and none arrives in that second (Poisson), so ~100 % at any real
        # load, which is why utilisation is no scaling signal (vllm-metrics.md §8).
        arriving = batch / model.duration(batch) * _GPU_SAMPLE_SECONDS
        return ready * 100.0 * (1.0 - math.exp(-(batch + arriving + waiting / ready)))
    sat = policy.saturation
    assert metric == "vllm_saturation" and sat is not None
    terms = [(running + waiting) / ready / sat.capacity]
    if sat.kv_target:
        terms.append(kv / sat.kv_target)
    if sat.queue_target:
        terms.append(waiting / ready / sat.queue_target)
    return max(terms)


class Reader:
    """The gauges a refresh serves: the fleet's state at the scrape (its means, or with a `Sampler`
    the counts a scrape reads), averaged over the policy's `smoothing` window of scrapes."""

    def __init__(
        self,
        policy: Policy,
        model: ServiceModel,
        states: States,
        costs: list[float],
        dt: float,
        sampler: Sampler | None,
        router: Router,
    ) -> None:
        self.policy, self.model, self.states, self.costs, self.dt = policy, model, states, costs, dt
        self.sampler, self.router = sampler, router

    def scraped(self, seen: int) -> tuple[float, float, int] | None:
        """(running, waiting, ready) summed over the pods at the scrape in tick `seen`."""
        states = self.states
        ready, waiting = states.ready[seen], states.waiting[seen]
        if self.sampler is None:
            return states.running[seen], waiting, ready
        if self.policy.durable:
            # The upstream queue's depth is one number, not a pod's gauge: a whole count, as read.
            return states.running[seen], self.sampler.draws.round(waiting), ready
        model = self.model
        batch = states.running[seen] / ready if ready else 0.0
        duration = model.duration(batch) * self.costs[seen] / self.dt
        state = self.sampler.state(seen, duration, waiting, ready, model.slots, self.router)
        return None if state is None else (state[0], state[1], ready)

    def value(self, metric: str, seen: int, every: int) -> float | None:
        """`metric` as served from the refresh in tick `seen` (scrapes every `every` ticks)."""
        window = self.policy.smoothing
        count = max(1, round(window / (every * self.dt))) if window > 0 else 1
        reads = [self.scraped(i) for i in range(seen, max(-1, seen - count * every), -every)]
        known = [r for r in reads if r is not None and (r[2] > 0 or metric == DURABLE)]
        if not known:
            return None
        if len(known) == 1:
            running, waiting, ready = known[0]
        else:
            # The mean of the window's scrapes, gauge by gauge (Prometheus's avg_over_time): a scrape
            # with no Ready pod has no sample to average.
            running = math.fsum(r[0] for r in known) / len(known)
            waiting = math.fsum(r[1] for r in known) / len(known)
            ready = known[0][2]
        return value_of(metric, self.policy, self.model, running, waiting, ready)


@dataclass
class States:
    """The fleet's state at the end of every tick of a segment: what a lagging pipeline reads."""

    running: list[float]
    waiting: list[float]
    ready: list[int]

    @classmethod
    def sized(cls, n: int) -> States:
        """Room for `n` ticks."""
        return cls([0.0] * n, [0.0] * n, [0] * n)
