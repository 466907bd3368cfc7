"""Two pools: traffic through a prefill pool, then the KV hand-over, then a decode pool.

Each pool is the fleet model (`lab.backtest.fleet.Fleet`, one step per tick, cohorts, cold starts,
requests waiting at the pod they were sent to) of its own kind of replica (`PairModel`):

* a **prefill pod** takes a request for its prompt only: the fleet's request is a prompt of the
  reference length, its capacity the measured prefill throughput over that length, and a tick's
  cost its prompt tokens over the reference (a long prompt is a heavy request). Its TTFT is its
  wait plus its prefill (`ServiceModel.ttft` set to the prefill's duration at the batch);
* a **decode pod** takes it after the hand-over (`handover` seconds): the fleet's request is the
  generation of the reference output, cost the tick's output tokens over it; its first token comes
  one decode step (the TPOT at its batch) after it is admitted, and its TPOT is its batch's.

A request's TTFT is its prefill TTFT + the hand-over + its decode wait + one decode step, and it
meets the SLO when that and its decode batch's TPOT meet it. Cohorts keep this exact: every
admission on the prefill pool sends its cohort to the decode pool's tick of `arrival + prefill TTFT
+ hand-over`, carrying that time (`_Handed`), and every admission on the decode pool judges its
cohorts with the times they carry. Requests dropped by either pool (removed pods, no pod Ready) miss
both objectives. GPU time is both pools' pods, loading or Ready.

Seeded replays (`seed=`) draw whole arrivals and read each pool's gauges as counts at the scrape
(`lab.backtest.sampling`, one `Sampler` per pool on one seed's draws), as `simulate(seed=...)` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from lab.backtest.fleet import Fleet, Router, Tally
from lab.backtest.history import History
from lab.backtest.pools.model import PairModel
from lab.backtest.pools.policy import BACKLOG, PairPolicy, Role
from lab.backtest.reading import States
from lab.backtest.sampling import Draws, Sampler
from lab.backtest.simulate import expand
from lab.hpa import MetricError, Scale, milli_value
from lab.slo import Slo

#: TTFT keys are tenths of a millisecond, as `Tally.ttfts`
_KEY = 10_000


@dataclass
class PairRun:
    """One pair policy's outcome over the history."""

    policy: PairPolicy
    tally: Tally = field(default_factory=Tally)
    """Joint outcomes (TTFT end to end, TPOT of the decode batch); `replica_seconds` both pools'."""
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    arrived: float = 0.0
    in_flight_end: float = 0.0
    scale_events: int = 0
    peak: dict[str, int] = field(default_factory=lambda: {"prefill": 0, "decode": 0})
    seconds: float = 0.0


class _PoolFleet(Fleet):
    """A `Fleet` that says which cohorts each admission took: (tick, [(arrival tick, requests)], batch
    in quarter requests), called after the fleet's own accounting."""

    on_admit: Callable[[int, list[tuple[int, float]], int], None]

    def _admit(self, group: Any, index: int, amount: float, quarter: int) -> None:
        parts: list[tuple[int, float]] = []
        left = amount
        for stamp, size in group.queue:  # oldest first, as the fleet takes them
            if left <= 1e-12:
                break
            part = min(size, left)
            parts.append((int(stamp), part))
            left -= part
        super()._admit(group, index, amount, quarter)
        self.on_admit(index, parts, quarter)


def _start(
    policy: PairPolicy, pair: PairModel, rate: float, in_cost: float, out_cost: float
) -> dict[Role, int]:
    """Where a segment starts: the pods the first tick's load needs at the knee share (a unit's
    multiples for a joint policy), within the policy's bounds."""
    need = pair.need(rate, pair.prompt_tokens * in_cost, pair.decode.output_tokens * out_cost)
    pods = [max(1, math.ceil(x - 1e-9)) for x in need]
    if policy.joint is None:
        return {
            "prefill": min(policy.prefill.max_replicas, max(policy.prefill.min_replicas, pods[0])),
            "decode": min(policy.decode.max_replicas, max(policy.decode.min_replicas, pods[1])),
        }
    p, d = policy.joint
    units = max(math.ceil(pods[0] / p), math.ceil(pods[1] / d))
    units = min(policy.max_units, max(policy.min_units, units))
    return {"prefill": units * p, "decode": units * d}


def simulate_pair(
    policy: PairPolicy,
    pair: PairModel,
    history: History,
    slo: Slo,
    *,
    resolution: float = 1.0,
    seed: int | None = None,
    router: Router = "service",
) -> PairRun:
    """Play `history` (arrivals, prompt and output tokens per step) through the two pools of `pair`
    scaled by `policy`; `seed`: whole requests and sampled gauges (`None`: the fluid replay)."""
    dt = history.step / max(1, round(history.step / min(resolution, history.step)))
    run = PairRun(policy)
    draws = Draws(seed) if seed is not None else None
    # `expand` reads the output token series as the cost: the prompt series is the prefill pool's.
    prompts = replace(history, output_tokens=history.prompt_tokens)
    for first, end in history.segments():
        arrivals, out_cost = expand(history, first, end, dt, pair.decode)
        _, in_cost = expand(prompts, first, end, dt, pair.prefill)
        head = arrivals[: max(1, round(60 / dt))]
        rate = sum(head) / (len(head) * dt)  # the expected first minute, before any draw
        if draws is not None:
            arrivals = draws.arrivals(arrivals)
        _Segment(run, policy, pair, slo, dt, (arrivals, in_cost, out_cost), rate, draws, router).play()
    return run


class _Segment:
    """One run of known data through both pools."""

    def __init__(
        self,
        run: PairRun,
        policy: PairPolicy,
        pair: PairModel,
        slo: Slo,
        dt: float,
        series: tuple[list[float], list[float], list[float]],
        rate: float,
        draws: Draws | None,
        router: Router,
    ) -> None:
        self.run, self.policy, self.pair, self.slo, self.dt = run, policy, pair, slo, dt
        arrivals, in_cost, out_cost = series
        self.arrivals, self.cost = arrivals, {"prefill": in_cost, "decode": out_cost}
        n = len(arrivals)
        self.handed: list[dict[int, float]] = [{} for _ in range(n)]
        """By decode arrival tick: time since arrival (TTFT key) -> requests handed over then."""
        self.handed_total = [0.0] * n
        self.router = router
        self.start = _start(policy, pair, rate, in_cost[0], out_cost[0])
        models = {"prefill": pair.prefill, "decode": pair.decode}
        self.fleets: dict[Role, _PoolFleet] = {}
        for role in ("prefill", "decode"):
            fleet = _PoolFleet(
                models[role],
                dt=dt,
                cold_start=policy.cold_start,
                durable=False,
                slo_ttft=slo.ttft,
                slo_tpot=slo.tpot,
                initial=self.start[role],
                router=router,
                whole=draws is not None,
            )
            self.fleets[role] = fleet
        self.fleets["prefill"].on_admit = self._prefilled
        self.fleets["decode"].on_admit = self._decoded
        self.states = {role: States.sized(n) for role in ("prefill", "decode")}
        self.samplers = {role: Sampler(draws, n) for role in ("prefill", "decode")} if draws else None
        self.draws = draws
        self.tally = Tally()

    def _prefilled(self, index: int, parts: list[tuple[int, float]], quarter: int) -> None:
        """Cohorts whose prefill started at `index` reach the decode pool after it and the hand-over."""
        model, dt = self.pair.prefill, self.dt
        took = model.ttft(quarter / 4) * self.cost["prefill"][index] + self.pair.handover
        for stamp, part in parts:
            since = (index - stamp) * dt + took
            at = stamp + round(since / dt)
            if at < len(self.handed):
                key = round(since * _KEY)
                self.handed[at][key] = self.handed[at].get(key, 0.0) + part
                self.handed_total[at] += part

    def _decoded(self, index: int, parts: list[tuple[int, float]], quarter: int) -> None:
        """Cohorts admitted to a decode batch at `index`: judged end to end with the time they carry."""
        model, dt, slo, tally = self.pair.decode, self.dt, self.slo, self.tally
        step = model.ttft(quarter / 4)
        tpot_good = model.tpot(quarter / 4) <= slo.tpot
        for at, part in parts:
            total = self.handed_total[at]
            if total <= 0:
                continue
            tally.served += part
            tally.batches[quarter] = tally.batches.get(quarter, 0.0) + part
            if tpot_good:
                tally.tpot_good += part
            wait = (index - at) * dt + step
            for key, amount in self.handed[at].items():
                share = part * amount / total
                ttft = key / _KEY + wait
                tkey = round(ttft * _KEY)
                tally.ttfts[tkey] = tally.ttfts.get(tkey, 0.0) + share
                if ttft <= slo.ttft + 1e-9:
                    tally.ttft_good += share
                    if tpot_good:
                        tally.both_good += share

    def play(self) -> None:
        run, dt, fleets, states = self.run, self.dt, self.fleets, self.states
        control = self._controller()
        sync_ticks = max(1, round(self.policy.sync_period / dt))
        prefill, decode = fleets["prefill"], fleets["decode"]
        for k, arrived in enumerate(self.arrivals):
            if k % sync_ticks == 0:
                control(k)
                for role in ("prefill", "decode"):
                    run.peak[role] = max(run.peak[role], len(fleets[role].pods))
            prefill.tick(k, arrived, self.cost["prefill"][k])
            decode.tick(k, self.handed_total[k], self.cost["decode"][k])
            for role, fleet in (("prefill", prefill), ("decode", decode)):
                state = states[role]
                state.running[k], state.waiting[k], state.ready[k] = fleet.running, fleet.waiting, fleet.ready
                if self.samplers is not None:
                    self.samplers[role].record(k, fleet.admitted)
        tally = self.tally
        tally.dropped = prefill.tally.dropped + decode.tally.dropped
        run.prefill_seconds += prefill.tally.replica_seconds
        run.decode_seconds += decode.tally.replica_seconds
        tally.replica_seconds = prefill.tally.replica_seconds + decode.tally.replica_seconds
        run.tally.merge(tally)
        run.arrived += sum(self.arrivals)
        handed = sum(self.handed_total)
        run.in_flight_end += (
            (sum(self.arrivals) - handed - prefill.tally.dropped) + decode.waiting + decode.running
        )
        run.seconds += len(self.arrivals) * dt

    def value(self, role: Role, metric: str, seen: int) -> float | None:
        """`metric` of `role`'s pool as served from the scrape in tick `seen` (`None`: no pod Ready)."""
        fleet, state = self.fleets[role], self.states[role]
        if seen < 0:
            return 0.0
        ready, running, waiting = state.ready[seen], state.running[seen], state.waiting[seen]
        if ready == 0:
            return None
        cost = self.cost[role][seen]
        if self.samplers is not None and self.draws is not None:
            duration = fleet.model.duration(running / ready) * cost / self.dt
            counted = self.samplers[role].state(
                seen, duration, waiting, ready, fleet.model.slots, self.router
            )
            if counted is None:
                return None
            running, waiting = counted
        if metric == BACKLOG:
            # Requests held x their prompt tokens / (the pool's throughput): the adapter's arithmetic.
            tokens = self.pair.prompt_tokens * cost
            return (running + waiting) * tokens / (self.pair.prefill_throughput * ready)
        if metric == "vllm_requests_running":
            return running
        if metric == "vllm_requests_inflight":
            return running + waiting
        assert metric == "vllm_kv_cache_usage"
        return min(1.0, running / ready * fleet.model.kv_per_request)

    def _controller(self) -> Callable[[int], None]:
        policy, dt, fleets, run = self.policy, self.dt, self.fleets, self.run
        lag = round(policy.pipeline.lag / dt)
        every = max(1, round(policy.pipeline.interval / dt))
        hpas = policy.controllers()
        unit = policy.joint
        desired = [self.start["prefill"] // unit[0] if unit else self.start["prefill"], self.start["decode"]]

        def sync(k: int) -> None:
            now = k * dt
            seen = ((k - lag) // every) * every - 1
            for i, (hpa, reads) in enumerate(hpas):
                values = [self.value(role, metric, seen) for role, metric in reads]
                readings = [
                    MetricError("no ready replica reports the metric") if v is None else milli_value(v)
                    for v in values
                ]
                if unit is None:
                    role: Role = "prefill" if i == 0 else "decode"
                    fleet = fleets[role]
                    scale = Scale(desired[i], len(fleet.pods), fleet.ready)
                else:
                    ready = min(fleets["prefill"].ready // unit[0], fleets["decode"].ready // unit[1])
                    scale = Scale(desired[i], len(fleets["prefill"].pods) // unit[0], ready)
                result = hpa.sync(now, scale, readings)
                if not result.rescale:
                    continue
                desired[i] = result.desired_replicas
                run.scale_events += 1
                if unit is None:
                    fleets["prefill" if i == 0 else "decode"].scale_to(now, desired[i])
                else:
                    fleets["prefill"].scale_to(now, desired[i] * unit[0])
                    fleets["decode"].scale_to(now, desired[i] * unit[1])

        return sync
