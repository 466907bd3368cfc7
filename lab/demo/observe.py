"""Observation: at every tick, what the fleet, the Deployment, the HPA, the clients and (in a queue run)
the upstream queue show, as a `Tick`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from lab.demo.cluster.deployment import Deployment
from lab.demo.loadgen import Scenario
from lab.demo.request_log import RequestLog
from lab.demo.timeline import Timeline
from lab.records import Tick


class QueueGauges(Protocol):
    """What a tick records of an upstream queue."""

    def gauges(self) -> dict[str, int]:
        """`queue_depth`, `dlq_depth`, `consumers` and `messages_lost` now (the `Tick` fields)."""
        ...


class Observer:
    """Records one `Tick` per call of `observe` into `ticks` and hands it to `show`."""

    def __init__(
        self,
        timeline: Timeline,
        deployment: Deployment,
        log: RequestLog,
        *,
        profile: Scenario,
        capacity: float,
        metric: Callable[[], float | None],
        show: Callable[[Tick], None],
        per_replica: Callable[[], float | None] = lambda: None,
        target: float | None = None,
        queue: QueueGauges | None = None,
    ) -> None:
        self.timeline = timeline
        self.deployment = deployment
        self.log = log
        self.profile = profile
        self.capacity = capacity
        self.metric = metric
        """The External metric the HPA last read, in units (`None` when the read failed)."""
        self.per_replica = per_replica
        """What the HPA compared with an AverageValue target at its last sync (`None` otherwise)."""
        self.target = target
        """The first metric's target, in the metric's unit, recorded on every tick."""
        self.queue = queue
        self.show = show
        self.ticks: list[Tick] = []

    async def observe(self) -> None:
        """Record the run's state now and show it."""
        t = self.timeline.now()
        fleet = self.deployment.fleet
        ready = fleet.ready_replicas
        for replica in ready:
            replica.runner.catch_up()  # an engine waits between its events: bring it to now first
        engines = [r.engine for r in ready]
        ttft_p90, tpot_p90 = self.log.recent_p90(t)
        sent, completed = self.log.take_counts()
        previous = self.ticks[-1].t if self.ticks else 0.0
        elapsed = max(t - previous, 1e-9)
        stage, load = self.profile.at(t)
        tick = Tick(
            t=round(t, 3),
            stage=stage.name,
            offered_rps=load * self.capacity,
            sent_rps=sent / elapsed if self.ticks else 0.0,
            completed_rps=completed / elapsed if self.ticks else 0.0,
            # No Ready replica, no engine reporting: unknown (a gap), as the adapter answers 503 then.
            waiting=sum(len(e.waiting) for e in engines) if engines else None,
            running=sum(len(e.running) for e in engines) if engines else None,
            kv_usage=sum(e.kv.usage for e in engines) / len(engines) if engines else None,
            tpot_p90=tpot_p90,
            ttft_p90=ttft_p90,
            tpot_mean=self.log.recent_tpot_mean(t),
            metric=self.metric(),
            metric_per_replica=self.per_replica(),
            metric_target=self.target,
            desired=self.deployment.desired,
            ready=len(ready),
            replicas=len(fleet.replicas),
            **(self.queue.gauges() if self.queue is not None else {}),
        )
        self.ticks.append(tick)
        self.show(tick)
