"""Observation of a live rehearsal: at every tick, the engines' own gauges, the Deployment, the HPA and
the clients, as the demo's `Tick` (so the demo's CSV, picture, view and summary read it unchanged).

Queue, batch and KV usage come from each Ready engine's `/metrics` (vLLM's gauges, read with the
profile's page reader); an engine whose page cannot be read at a tick is left out of that tick's
sums, and with none read they are unknown, as in the demo while no replica is Ready.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import aiohttp

from adapter.errors import ExpositionError
from lab.demo.request_log import RequestLog
from lab.demo.timeline import Timeline
from lab.load.metrics_reader import NotVllm, PageReader, Snapshot
from lab.records import Tick
from lab.rehearsal.load import Load
from lab.rehearsal.replicas import EngineFleet, Replica


class Observer:
    """Records one `Tick` per call of `observe` into `ticks` and hands it to `show`."""

    def __init__(
        self,
        timeline: Timeline,
        fleet: EngineFleet,
        log: RequestLog,
        load: Load,
        session: aiohttp.ClientSession,
        model: str,
        *,
        metric: Callable[[], float | None],
        per_replica: Callable[[], float | None],
        show: Callable[[Tick], None],
        tick: float,
    ) -> None:
        self.timeline = timeline
        self.fleet = fleet
        self.log = log
        self.load = load
        self.session = session
        self.reader = PageReader(model)
        self.metric = metric
        self.per_replica = per_replica
        self.show = show
        # A page read gets most of a tick (wall seconds), at least a second: a busy engine answers late.
        self.read_timeout = aiohttp.ClientTimeout(total=max(1.0, 0.8 * timeline.clock.real(tick)))
        self.ticks: list[Tick] = []

    async def observe(self) -> None:
        """Record the run's state now and show it."""
        t = self.timeline.now()
        scale = self.fleet.scale()
        ready = self.fleet.ready_replicas
        pages = await asyncio.gather(*(self._read(replica) for replica in ready))
        read = [page for page in pages if page is not None]
        ttft_p90, tpot_p90 = self.log.recent_p90(t)
        sent, completed = self.log.take_counts()
        previous = self.ticks[-1].t if self.ticks else 0.0
        elapsed = max(t - previous, 1e-9)
        tick = Tick(
            t=round(t, 3),
            stage=self.load.stage_at(t),
            offered_rps=self.load.rate_at(t),
            sent_rps=sent / elapsed if self.ticks else 0.0,
            completed_rps=completed / elapsed if self.ticks else 0.0,
            waiting=round(sum(p.waiting for p in read)) if read else None,
            running=round(sum(p.running for p in read)) if read else None,
            kv_usage=sum(p.kv_usage for p in read) / len(read) if read else None,
            tpot_p90=tpot_p90,
            ttft_p90=ttft_p90,
            tpot_mean=self.log.recent_tpot_mean(t),
            metric=self.metric(),
            metric_per_replica=self.per_replica(),
            desired=scale.spec_replicas,
            ready=scale.ready_pods,
            replicas=scale.status_replicas,
        )
        self.ticks.append(tick)
        self.show(tick)

    async def _read(self, replica: Replica) -> Snapshot | None:
        """One engine's gauges now; `None` when its page cannot be read in time."""
        with contextlib.suppress(aiohttp.ClientError, TimeoutError, NotVllm, ExpositionError):
            async with self.session.get(replica.metrics_url, timeout=self.read_timeout) as response:
                if response.status == 200:
                    return self.reader.read(await response.text(), self.timeline.now())
        return None
