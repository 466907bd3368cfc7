"""A fast, deterministic model of a vLLM fleet behind a Service: fluid queues, one step per tick.

Requests are amounts, not individuals: each tick's arrivals join a FIFO queue as one cohort stamped
with its arrival time. Every tick:

1. Pods whose cold start is over become Ready; with none Ready, arrivals are refused (a Service
   without endpoints), unless they wait in a durable upstream queue.
2. The Ready replicas take waiting cohorts, oldest first, up to what they complete in a tick at
   saturation (`capacity` each). A cohort's wait is its TTFT minus the unloaded TTFT.
3. The running requests follow from Little's law: taking `x` requests per second, a replica runs
   the batch `b` with `b = x × d(b)` (`ServiceModel.batch_at`: a full batch at capacity), and the
   admitted requests' TPOT is that batch's (`ServiceModel.tpot`). Requests are heavier or lighter
   than the calibration's by `cost` (the tick's output tokens over the calibration's).

Requests last seconds while the HPA acts over tens of seconds, so each tick is taken as steady
(quasi-static); queueing inside a tick is not modelled, so a queue shows only once it lasts a tick.

Pods are created by the controller (`scale_to`): new pods load for `cold_start`; removed pods go
not-Ready first, then newest (a ReplicaSet's choice). What the fleet
offers the HPA is its state at the end of each tick (`running`, `waiting`, `ready`, `pods`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field

from lab.backtest.calibration import ServiceModel


@dataclass
class Tally:
    """What became of the requests: outcomes by latency, counted in (fractional) requests."""

    served: float = 0.0
    dropped: float = 0.0
    ttft_good: float = 0.0
    tpot_good: float = 0.0
    both_good: float = 0.0
    waits: dict[int, float] = field(default_factory=dict)
    """Ticks waited in the queue → requests (TTFT = unloaded TTFT + ticks × tick)."""
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
        for key, value in other.waits.items():
            self.waits[key] = self.waits.get(key, 0.0) + value
        for key, value in other.batches.items():
            self.batches[key] = self.batches.get(key, 0.0) + value


class Fleet:
    """Pods, their queue and their running requests; `tick` advances one step of `dt` seconds."""

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
    ) -> None:
        self.model = model
        self.dt = dt
        self.cold_start = cold_start
        self.durable = durable
        self.pods: list[float] = [0.0] * initial
        """Ready-at time of every pod, oldest first (so ascending: the cold start is one constant)."""
        self.queue: deque[list[float]] = deque()
        """[arrival tick, requests] cohorts, oldest first."""
        self.waiting = 0.0
        self.running = 0.0
        self.ready = initial
        self.tally = Tally()
        # Waits and batches that meet the SLO, precomputed: TTFT = base + ticks × dt.
        self._max_good_wait = int((slo_ttft - model.ttft_base) // dt) if slo_ttft >= model.ttft_base else -1
        self._slo_tpot = slo_tpot
        self._tpot_cache: dict[int, bool] = {}

    def scale_to(self, now: float, replicas: int) -> None:
        """`spec.replicas` changed: create pods that load for the cold start, or remove pods."""
        pods = self.pods
        if replicas > len(pods):
            pods.extend([now + self.cold_start] * (replicas - len(pods)))
        elif replicas < len(pods):
            # Not-Ready pods are the newest (ascending ready-at): removing from the end takes them first.
            del pods[replicas:]

    def _tpot_good(self, quarter: int) -> bool:
        good = self._tpot_cache.get(quarter)
        if good is None:
            good = self.model.tpot(quarter / 4) <= self._slo_tpot
            self._tpot_cache[quarter] = good
        return good

    def tick(self, index: int, arrivals: float, cost: float) -> None:
        """One step: arrivals join, the Ready replicas admit what they can serve, oldest first."""
        pods = self.pods
        ready = self.ready = bisect_right(pods, index * self.dt)
        tally = self.tally
        tally.replica_seconds += len(pods) * self.dt
        if ready == 0 and not self.durable:
            # A Service without endpoints refuses: the new requests and any left at removed pods.
            tally.dropped += arrivals + self.waiting
            self.queue.clear()
            self.waiting = self.running = 0.0
            return
        if arrivals > 0:
            self.queue.append([index, arrivals])
            self.waiting += arrivals
        if not ready:
            self.running = 0.0
            return
        model = self.model
        admitted = min(ready * model.capacity * self.dt / cost, self.waiting)
        batch = model.batch_at(admitted * cost / (ready * self.dt))
        self.running = ready * batch
        if admitted > 0:
            self._admit(index, admitted, int(batch * 4 + 0.5))

    def _admit(self, index: int, amount: float, quarter: int) -> None:
        """Take `amount` requests from the queue, oldest first, each cohort with its wait."""
        tally = self.tally
        self.waiting -= amount
        tpot_good = self._tpot_good(quarter)
        tally.batches[quarter] = tally.batches.get(quarter, 0.0) + amount
        tally.served += amount
        if tpot_good:
            tally.tpot_good += amount
        queue, waits, max_good = self.queue, tally.waits, self._max_good_wait
        while amount > 1e-12 and queue:
            cohort = queue[0]
            part = cohort[1] if cohort[1] <= amount else amount
            wait = index - int(cohort[0])
            waits[wait] = waits.get(wait, 0.0) + part
            if wait <= max_good:
                tally.ttft_good += part
                if tpot_good:
                    tally.both_good += part
            amount -= part
            cohort[1] -= part
            if cohort[1] <= 1e-12:
                queue.popleft()
        if not queue:
            self.waiting = 0.0
