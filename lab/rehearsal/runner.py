"""The rehearsal: the demo's loop on engine processes, from the first replica's start to the last one's stop.

```
 Load (trace, Prometheus range, the demo's day) ──► Clients ──► Router (least in flight, Ready only)
                                                                   │ /v1/completions (streaming)
                                                                   ▼
      EngineFleet: one engine process per replica, each on its own GPU and port (`lab.engine`)
                                                                   │ /metrics of the Ready replicas
                                                                   ▼
                 adapter (the demo's `serve_adapter`: scrape source, plain HTTP, free loopback port)
                                                                   │ external.metrics.k8s.io
                                                                   ▼
              HPALoop (lab.hpa, the backtest policy's own controller) ──► EngineFleet.scale_to

 Observer every tick ──► Tick ──► LiveView, then the demo's report and the rehearsal's own files
```

Everything runs on the wall clock scaled by `time_scale` (`ScaledClock`): the engines' seconds. The
first replicas are started and Ready before the load begins (t = 0). However the run ends (the
load's end, an engine that will not start, Ctrl-C, an error) every engine process started is
stopped before `play` returns or raises; a stop (Ctrl-C, SIGTERM) or an engine that will not start
returns what was played until then, marked `stopped`, so that the record is still written.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final, TextIO

import aiohttp

from lab.backtest.simulate import hpa_for
from lab.clock import ScaledClock
from lab.demo.cluster.embedded import serve_adapter
from lab.demo.cluster.hpa_loop import HPALoop
from lab.demo.cluster.metrics_client import ExternalMetricsClient
from lab.demo.request_log import RequestLog
from lab.demo.timeline import Timeline
from lab.demo.view import LiveView
from lab.engine.placement import PlacementPool, host_gpus, placements
from lab.engine.process import EngineFailure
from lab.load.workload import Workload
from lab.records import RequestRecord, Tick
from lab.rehearsal.clients import Clients, Sent
from lab.rehearsal.load import Load
from lab.rehearsal.observe import Observer
from lab.rehearsal.replicas import ColdStart, EngineFleet
from lab.rehearsal.router import FaultCounts, Router
from lab.rehearsal.settings import RehearsalError, RehearsalSettings

LOGS = "engines"
"""The folder of `out` that holds each engine's log."""

ENGINE_FAILURE: Final = "engine failure"
"""`Stop.by` for a run ended by an engine that would not start (its reason in `Stop.reason`)."""


@dataclass(frozen=True)
class Stop:
    """How a run ended before its load did."""

    at: float
    """Seconds into the load (0 when the stop came while the first replicas were loading)."""
    by: str
    """The signal's name (SIGINT, SIGTERM), or `ENGINE_FAILURE`."""
    in_flight: int
    """Requests sent and unfinished at the stop: in neither the completed nor the failed count."""
    load_began: bool
    """Whether the load had started (else nothing was sent and there are no ticks)."""
    reason: str | None = None


@dataclass(frozen=True)
class Played:
    """What a rehearsal recorded."""

    ticks: list[Tick]
    requests: list[RequestRecord]
    sent: list[Sent]
    """Every request sent (the trace the backtest replays)."""
    scale_events: int
    """Syncs at which the HPA changed spec.replicas."""
    cold_starts: list[ColdStart]
    """Every replica's measured life, times in seconds into the run (negative: before the load)."""
    gpu_seconds: float
    """Seconds of GPU held by engine processes, from each one's start to its stop."""
    end: float
    """Seconds into the run when the last engine was stopped."""
    faults: FaultCounts = field(default_factory=FaultCounts)
    """What replicas that failed after Ready did to the requests in flight on them."""
    stopped: Stop | None = None
    """Why and when the run ended early; `None` for a run that played its whole load."""


def pool_for(settings: RehearsalSettings) -> PlacementPool:
    """One placement per GPU given (or visible), else `max_replicas` GPU-less slots."""
    gpus = host_gpus(list(settings.gpus) or None)
    maximum = settings.policy.max_replicas
    if gpus and len(gpus) < maximum:
        raise RehearsalError(
            f"maxReplicas {maximum} needs {maximum} GPUs, one engine each; the host lends {len(gpus)} "
            f"({', '.join(gpus)}): lower --max-replicas or give more with --gpus"
        )
    return PlacementPool(placements(gpus[:maximum], maximum))


class Rehearsal:
    """One run; `play()` drives it to the end."""

    def __init__(
        self,
        settings: RehearsalSettings,
        load: Load,
        workload: Workload,
        stream: TextIO,
        *,
        stopped_by: Callable[[], str] = lambda: "cancelled",
    ) -> None:
        self.settings = settings
        self.load = load
        self.workload = workload
        self.stream = stream
        self.clock = ScaledClock(settings.time_scale)
        self.timeline = Timeline(self.clock)
        self.requests = RequestLog()
        self.controller = hpa_for(settings.policy)
        self.stopped_by = stopped_by
        """Names what cancelled `play` (the caller's signal handler knows which signal it was)."""
        self.fleet: EngineFleet | None = None
        self.hpa: HPALoop | None = None
        self.clients: Clients | None = None
        self.observer: Observer | None = None
        self.began = False

    def view(self) -> LiveView:
        s, policy = self.settings, self.settings.policy
        return LiveView(
            self.stream,
            metric=policy.metric,
            target=policy.target,
            max_replicas=policy.max_replicas,
            peak_rps=self.load.peak_rate,
            interactive=s.live,
            slo=s.slo,
            target_type=policy.target_type,
        )

    async def play(self) -> Played:
        """Start the first replicas, play the load, stop everything; what was recorded. A stop (the
        task cancelled: Ctrl-C, SIGTERM) or an engine that would not start ends the run early, and what
        was played until then is returned with its `stopped`: the record is written on every exit."""
        s = self.settings
        pool = pool_for(s)
        view = self.view()
        for stale in (s.out / LOGS).glob("*.log"):  # an earlier run's engines: not this run's
            stale.unlink()
        stopped: Stop | None = None
        async with contextlib.AsyncExitStack() as stack:
            connector = aiohttp.TCPConnector(limit=0)  # a connection per request in flight, as clients have
            session = await stack.enter_async_context(aiohttp.ClientSession(connector=connector))
            router = Router(session, s.model, self.clock)
            fleet = EngineFleet(
                s.engine,
                pool,
                self.clock,
                session,
                s.out / LOGS,
                idle=router.idle,
                on_ready=lambda replica: router.add(replica.name, replica.url),
                on_retire=lambda replica: router.remove(replica.name),
                grace=s.grace,
                ready_within=s.ready_within,
                on_fail=lambda replica: router.fail(replica.name),
                unresponsive_after=s.unresponsive_after,
            )
            self.fleet = fleet
            router.on_first_token = fleet.served
            stack.push_async_callback(fleet.close)
            try:
                await self._run(stack, session, router, fleet, view)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is None or not task.cancelling():
                    raise  # not a stop of this run: someone else's cancellation
                # The stop is handled here (the record is its answer), so the engines' shutdown below
                # must not read as cancelled too.
                task.uncancel()
                stopped = await self._stop(self.stopped_by())
            except EngineFailure as failure:
                stopped = await self._stop(ENGINE_FAILURE, str(failure))
        # The stack is closed: every engine has stopped.
        start = self.timeline.start
        records = [_shifted(replica.record, start) for replica in fleet.every]
        end = self.clock.now() - start
        clients, hpa = self.clients, self.hpa
        return Played(
            self.observer.ticks if self.observer else [],
            list(self.requests.records),
            list(clients.sent) if clients else [],
            sum(1 for result in hpa.results if result.rescale) if hpa else 0,
            records,
            sum(r.held(end) for r in records),
            end,
            router.counts,
            stopped,
        )

    async def _run(
        self,
        stack: contextlib.AsyncExitStack,
        session: aiohttp.ClientSession,
        router: Router,
        fleet: EngineFleet,
        view: LiveView,
    ) -> None:
        """The run proper: the first replicas Ready, the adapter, the HPA and the load to its end. Each
        part is kept on `self` as it starts, so a stop part-way records what had begun."""
        s = self.settings
        await fleet.start(s.start_replicas)
        url = await stack.enter_async_context(serve_adapter(fleet, s.namespace, s.wall(s.scrape_interval)))
        hpa = HPALoop(self.controller, ExternalMetricsClient(session, url, s.namespace), fleet, self.timeline)
        clients = Clients(router, self.timeline, self.requests)
        stack.push_async_callback(clients.cancel)
        observer = Observer(
            self.timeline,
            fleet,
            self.requests,
            self.load,
            session,
            s.model,
            metric=lambda: hpa.reading,
            per_replica=lambda: hpa.per_replica,
            show=view.update,
            tick=s.tick,
        )
        self.hpa, self.clients, self.observer = hpa, clients, observer
        self.stream.write(self.banner(url) + "\n")
        self.timeline.begin()
        self.began = True
        rounds = asyncio.create_task(
            self.timeline.rounds((s.policy.sync_period, hpa.sync), (s.tick, observer.observe))
        )
        try:
            await self._until_played_or_failed(clients, fleet)
            await clients.drain(s.grace)
        finally:
            rounds.cancel()
            await asyncio.gather(rounds, return_exceptions=True)
        await observer.observe()

    async def _stop(self, by: str, reason: str | None = None) -> Stop:
        """The run ends here, before its load did: the requests in flight counted as such, one last tick."""
        if not self.began:  # stopped while the first replicas loaded: t = 0 is the stop
            self.timeline.begin()
        at = self.timeline.now()
        in_flight = await self.clients.stop() if self.clients else 0
        if self.observer is not None:
            await self.observer.observe()  # the fleet as the stop found it (each page read is bounded)
        return Stop(at=at, by=by, in_flight=in_flight, load_began=self.began, reason=reason)

    async def _until_played_or_failed(self, clients: Clients, fleet: EngineFleet) -> None:
        """Play the load; an engine that would not start ends the run with its reason."""
        sends = self.load.sends(self.workload, self.settings.seed)
        playing: asyncio.Future[Any] = asyncio.create_task(clients.play(sends, self.load.duration))
        try:
            await asyncio.wait([playing, fleet.failure], return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not playing.done():
                playing.cancel()
                await asyncio.gather(playing, return_exceptions=True)
        if fleet.failure.done():
            failure: EngineFailure = fleet.failure.result()
            raise failure
        playing.result()

    def banner(self, url: str) -> str:
        """What the run is about to do, printed before the load starts."""
        s, p = self.settings, self.settings.policy
        pace = "" if s.time_scale == 1 else f" (emulated, {s.time_scale:g}x the wall clock)"
        given = host_gpus(list(s.gpus) or None)
        # Without GPUs each engine sees whatever the host shows it: right for emulators only.
        gpus = ", ".join(given) if given else "none given: each engine sees the host's default devices"
        ready = ", ".join(
            f"{r.name} healthy after {r.record.to_healthy:.1f} s"
            for r in (self.fleet.every if self.fleet else [])
            if r.record.to_healthy is not None
        )
        return (
            f"vllm-autoscale rehearse: {self.load.source}, {self.load.duration:g} s of load{pace}\n"
            f"  HPA: {p.describe()}, sync {p.sync_period:g}s, tolerance {p.tolerance:g}, "
            f"scale-down window {p.downscale_stabilization:g}s\n"
            f"  engines: {s.engine}\n"
            f"  GPUs: {gpus}\n"
            f"  first replicas: {ready}\n"
            f"  adapter: {url} (scrape source on the Ready replicas, every {s.scrape_interval:g}s)"
        )


def _shifted(record: ColdStart, start: float) -> ColdStart:
    """`record` with its times in seconds since the load began."""

    def since(value: float | None) -> float | None:
        return None if value is None else value - start

    times = ("requested", "spawned", "healthy", "first_token", "retired", "stopped", "failed")
    shifted = {name: since(getattr(record, name)) for name in times}
    return replace(record, **shifted)  # type: ignore[arg-type]
