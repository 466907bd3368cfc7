"""A fast, deterministic model of a vLLM fleet behind a Service: fluid queues, one step per tick.

Requests are amounts, not individuals: each tick's arrivals join a FIFO queue as one cohort stamped
with its arrival time. Every tick:

1. Pods whose cold start is over become Ready; with none Ready, arrivals are refused (a Service
   without endpoints), unless they wait in a durable upstream queue.
2. A Service spreads each tick's arrivals evenly over the Ready pods (`router="service"`); a
   least-in-flight router (`router="least-inflight"`, the gateways that serve LLMs, the rehearsal's)
   sends them to the pods with the fewest in flight first, filling the emptiest up to the next level.
   Either way **a request waits at the pod it was sent to**: a backlog built on one replica drains at
   that replica's pace even after new replicas are Ready (they only get new arrivals). With a durable
   upstream queue (`queue_depth`) the replicas pull from one shared queue instead. Pods with the same state
   are kept as one group (usually one or two), which is what keeps a tick cheap.
3. Each pod takes its waiting cohorts, oldest first: at once while its batch has free slots
   (`slots`), then at the pace requests finish (`capacity`), so a burst fills the batch before it
   queues. A cohort's wait is its TTFT minus the unloaded TTFT.
4. The batch follows Little's law: taking `x` requests per second, a replica settles on the batch
   `b = x × d(b)` (`ServiceModel.batch_at`: a full batch at capacity), moving toward it with the
   requests' own duration `d(b)`; the admitted requests' TPOT is the batch's (`ServiceModel.tpot`).
   Requests are heavier or lighter than the calibration's by `cost` (the tick's output tokens over
   the calibration's).

Queueing inside a tick is not modelled: a queue shows once it lasts a tick.

Pods are created by the controller (`scale_to`): new pods load for `cold_start`; removed pods go
not-Ready first, then newest (a ReplicaSet's choice); requests still waiting at a removed pod are
lost (counted as dropped). What the fleet offers the HPA is its state at the end of each tick
(`running`, `waiting`, `ready`, `pods`) and the requests it started in the tick (`admitted`, from
which `lab.backtest.sampling` counts the requests running at an instant).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from typing import Final, Literal

from lab.backtest.calibration import ServiceModel

Router = Literal["service", "least-inflight"]
ROUTERS: Final = ("service", "least-inflight")


@dataclass
class Tally:
    """What became of the requests: outcomes by latency, counted in (fractional) requests."""

    served: float = 0.0
    dropped: float = 0.0
    ttft_good: float = 0.0
    tpot_good: float = 0.0
    both_good: float = 0.0
    ttfts: dict[int, float] = field(default_factory=dict)
    """TTFT in tenths of a millisecond → requests (the batch's TTFT plus the ticks waited)."""
    batches: dict[int, float] = field(default_factory=dict)
    """Batch at admission, in quarter requests → requests (TPOT follows from it)."""
    replica_seconds: float = 0.0

    def merge(self, other: Tally) -> None:
        """Add another segment's outcomes."""
        self.served += other.served
        self.dropped += other.dropped
        self.ttft_good += other.ttft_good
        self.tpot_good += other.tpot_good
        self.both_good += other.both_good
        self.replica_seconds += other.replica_seconds
        for key, value in other.ttfts.items():
            self.ttfts[key] = self.ttfts.get(key, 0.0) + value
        for key, value in other.batches.items():
            self.batches[key] = self.batches.get(key, 0.0) + value


class _Group:
    """Ready pods with the same queue: `pods` of them, each holding `waiting / pods` of its requests."""

    __slots__ = ("pods", "queue", "rate", "running", "waiting")

    def __init__(self, pods: int) -> None:
        self.pods = pods
        self.queue: deque[list[float]] = deque()
        """[arrival tick, requests] cohorts, oldest first."""
        self.waiting = 0.0
        self.running = 0.0
        self.rate = -1.0
        """Whole requests only: the admission rate per pod, averaged over a request's duration."""


class Fleet:
    """Pods, their queues and their running requests; `tick` advances one step of `dt` seconds."""

    def __init__(
        self,
        model: ServiceModel,
        *,
        dt: float,
        cold_start: float,
        durable: bool,
        slo_ttft: float,
        slo_tpot: float,
        initial: int,
        router: Router = "service",
        whole: bool = False,
    ) -> None:
        self.model = model
        self.router = router
        self.whole = whole
        """Arrivals are whole requests (a seeded replay): the batch follows their rate averaged over
        a request's duration, not one tick's count, whose noise the batch's convex growth with the
        rate (`ServiceModel.batch_at`) would turn into a longer batch on average."""
        self.dt = dt
        self.cold_start = cold_start
        self.durable = durable
        self.pods: list[float] = [0.0] * initial
        """Ready-at time of every pod, oldest first (so ascending: the cold start is one constant)."""
        self.groups: list[_Group] = [_Group(initial)]
        """The Ready pods in groups, oldest first (a durable queue keeps one group, even of 0 pods)."""
        self.waiting = 0.0
        self.running = 0.0
        self.ready = initial
        self.admitted = 0.0
        """Requests started in the last tick."""
        self.served_at: list[dict[int, float]] | None = None
        """Set to one dict per tick to keep, by arrival tick, the served requests' TTFTs (as in
        `Tally.ttfts`): what a picture of TTFT over time needs, and only it."""
        self.tally = Tally()
        # Per batch (in quarter requests), precomputed: TTFT = the batch's + ticks × dt.
        self._slo_ttft = slo_ttft
        self._slo_tpot = slo_tpot
        self._tpot_cache: dict[int, bool] = {}
        self._ttft_cache: dict[int, tuple[int, float]] = {}
        # `ServiceModel.duration` and `batch_at` unrolled for `tick` (a replay runs it once per second
        # of traffic): the same operations in the same order, so the same floats.
        self._saturated = model.saturated_duration
        self._spread = model.shape + model.slots
        self._k = self._saturated / self._spread

    def scale_to(self, now: float, replicas: int) -> None:
        """`spec.replicas` changed: create pods that load for the cold start, or remove pods."""
        pods = self.pods
        if replicas > len(pods):
            pods.extend([now + self.cold_start] * (replicas - len(pods)))
            return
        if replicas >= len(pods):
            return
        # Not-Ready pods are the newest (ascending ready-at): removing from the end takes them first.
        del pods[replicas:]
        excess = self.ready - min(self.ready, replicas)
        groups = self.groups
        while excess > 0:
            group = groups[-1]
            gone = min(excess, group.pods)
            if not self.durable:
                # What waited at the removed pods is lost with them.
                share = group.waiting * gone / group.pods
                self.tally.dropped += share
                self._take(group, share)
            group.running -= group.running * gone / group.pods
            group.pods -= gone
            excess -= gone
            self.ready -= gone
            if group.pods == 0 and not (self.durable and len(groups) == 1):
                groups.pop()

    def _take(self, group: _Group, amount: float) -> None:
        """Remove `amount` requests from the tail of a group's queue (the newest arrivals)."""
        group.waiting -= amount
        queue = group.queue
        while amount > 1e-12 and queue:
            cohort = queue[-1]
            part = min(cohort[1], amount)
            cohort[1] -= part
            amount -= part
            if cohort[1] <= 1e-12:
                queue.pop()

    def _ttft_at(self, quarter: int) -> tuple[int, float]:
        """(the longest wait in ticks that meets the TTFT objective, the batch's own TTFT)."""
        cached = self._ttft_cache.get(quarter)
        if cached is None:
            base = self.model.ttft(quarter / 4)
            good = int((self._slo_ttft - base) // self.dt) if self._slo_ttft >= base else -1
            cached = self._ttft_cache[quarter] = (good, base)
        return cached

    def _tpot_good(self, quarter: int) -> bool:
        good = self._tpot_cache.get(quarter)
        if good is None:
            good = self.model.tpot(quarter / 4) <= self._slo_tpot
            self._tpot_cache[quarter] = good
        return good

    def tick(self, index: int, arrivals: float, cost: float) -> None:
        """One step: arrivals join the pods' queues, each pod admits what it can serve, oldest first."""
        pods = self.pods
        ready = bisect_right(pods, index * self.dt)
        tally = self.tally
        tally.replica_seconds += len(pods) * self.dt
        groups = self.groups
        if ready > self.ready:
            self._joined(ready - self.ready)
        if ready == 0 and not self.durable:
            # A Service without endpoints refuses: the new requests (pods' queues left with them).
            tally.dropped += arrivals
            self.waiting = self.running = self.admitted = 0.0
            return
        model, dt, whole = self.model, self.dt, self.whole
        slots, capacity, shape = model.slots, model.capacity, model.shape
        saturated, spread, k = self._saturated, self._spread, self._k
        waiting = running = started = 0.0
        shares = self._least_inflight(arrivals) if self.router != "service" and len(groups) > 1 else None
        for g, group in enumerate(groups):
            if arrivals > 0:
                if self.durable:
                    share = arrivals
                elif shares is not None:
                    share = shares[g]
                else:
                    share = arrivals * group.pods / ready
                if share > 0:
                    group.queue.append([index, share])
                    group.waiting += share
            count = group.pods
            if count:
                held = group.running
                full = count * slots
                # A replica starts a request at once while its batch has a free slot, and otherwise
                # at the pace requests finish (capacity): a burst fills the batch before it queues.
                throughput = count * capacity * dt / cost
                free = full - held
                admitted = throughput + (free if free > 0.0 else 0.0)
                if group.waiting < admitted:
                    admitted = group.waiting
                rate = admitted * cost / (count * dt)
                duration = saturated * (shape + held / count) / spread * cost  # model.duration
                decay = math.exp(-dt / duration)
                if whole:
                    settle = 1.0 if group.rate < 0 else 1.0 - decay
                    group.rate += (rate - group.rate) * settle
                    rate = group.rate
                # model.batch_at(rate), a full batch at capacity
                target = full if rate >= capacity else count * (rate * k * shape / (1 - rate * k))
                # The batch moves toward its steady size with the requests' own duration, and holds
                # at least what was started beyond what could finish in the tick.
                relaxed = target + (held - target) * decay
                floor = held + admitted - throughput
                held = floor if floor > relaxed else relaxed  # max(relaxed, floor), min(full, ...)
                held = held if held < full else full
                group.running = held
                if admitted > 0:
                    started += admitted
                    self._admit(group, index, admitted, int(held / count * 4 + 0.5))
            else:
                group.running = 0.0
            waiting += group.waiting
            running += group.running
        self.waiting, self.running, self.admitted = waiting, running, started
        if len(groups) > 1:
            self._merge()

    def _least_inflight(self, arrivals: float) -> list[float]:
        """Each group's share of `arrivals` when each request goes to the pod with the fewest in
        flight: the emptiest pods are filled up to the next level first (water-filling)."""
        groups = self.groups
        levels = [(g.running + g.waiting) / g.pods if g.pods else math.inf for g in groups]
        order = sorted(range(len(groups)), key=levels.__getitem__)
        left, pods, level = arrivals, 0, levels[order[0]]
        filled = 0
        for position, g in enumerate(order):
            if levels[g] == math.inf:
                break
            pods += groups[g].pods
            filled = position + 1
            ceiling = levels[order[position + 1]] if position + 1 < len(order) else math.inf
            room = (ceiling - level) * pods
            if left <= room:
                level += left / pods
                left = 0.0
                break
            left -= room
            level = ceiling
        shares = [0.0] * len(groups)
        for g in order[:filled]:
            shares[g] = max(0.0, (level - levels[g]) * groups[g].pods)
        return shares

    def _joined(self, count: int) -> None:
        """Pods became Ready: they join a group with an empty queue (the newest), or start one."""
        self.ready += count
        last = self.groups[-1] if self.groups else None
        if last is not None and (self.durable or last.waiting <= 1e-12):
            last.pods += count
        else:
            self.groups.append(_Group(count))

    def _merge(self) -> None:
        """Groups whose queues are empty are the same state: one group."""
        groups = self.groups
        idle = [g for g in groups if g.waiting <= 1e-12]
        if len(idle) < 2:
            return
        keep = idle[0]
        for group in idle[1:]:
            keep.pods += group.pods
            keep.running += group.running
        self.groups = [g for g in groups if g is keep or g.waiting > 1e-12]

    def _admit(self, group: _Group, index: int, amount: float, quarter: int) -> None:
        """Take `amount` requests from a group's queue, oldest first, each cohort with its wait."""
        tally = self.tally
        group.waiting -= amount
        tpot_good = self._tpot_good(quarter)
        tally.batches[quarter] = tally.batches.get(quarter, 0.0) + amount
        tally.served += amount
        if tpot_good:
            tally.tpot_good += amount
        queue, ttfts, dt = group.queue, tally.ttfts, self.dt
        max_good, base = self._ttft_at(quarter)
        served_at = self.served_at
        while amount > 1e-12 and queue:
            cohort = queue[0]
            part = cohort[1] if cohort[1] <= amount else amount
            wait = index - int(cohort[0])
            key = round((base + wait * dt) * 10_000)
            ttfts[key] = ttfts.get(key, 0.0) + part
            if served_at is not None:
                at = served_at[int(cohort[0])]
                at[key] = at.get(key, 0.0) + part
            if wait <= max_good:
                tally.ttft_good += part
                if tpot_good:
                    tally.both_good += part
            amount -= part
            cohort[1] -= part
            if cohort[1] <= 1e-12:
                queue.popleft()
        if not queue:
            group.waiting = 0.0
