"""The Deployment of a rehearsal: each replica an engine process on its own GPU and port.

What the HPA model reads is `scale()` and what it sets is `scale_to()`, as for the demo's Deployment;
here a replica is a real process (`lab.engine`): created when the HPA scales up, waiting for a free
GPU like a pending pod, loading until `/health` answers, then Ready and sent requests by the router.
On scale-down the ReplicaSet's choice (loading ones first, then the newest) is taken out of the
router and out of the counts at once (a terminating pod leaves its EndpointSlice), keeps serving
what it holds for up to the grace period (vLLM finishes running requests on SIGTERM too; a drain
first is kinder to the router), and is then stopped with its process group.

A Ready replica is watched (`EngineProcess.watch`): one whose process exits or whose `/health` stays
silent (a crash, SIGSTOP, a hung server) is **failed** as a pod whose readiness probe fails: out of
the router at once (its requests in flight cut off: `Router.fail`), out of the Ready count the HPA
reads, and replaced as the ReplicaSet replaces a failed pod, while `spec.replicas` still asks for it.

Every replica records its cold start as measured: requested, process started, healthy, first token
served, stopped. `close()` ends every process started, however the run ends; `kill_now()` is for an
interpreter that is exiting and cannot wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import aiohttp

from lab.clock import ScaledClock
from lab.engine.placement import PlacementPool
from lab.engine.ports import on_a_free_port
from lab.engine.process import (
    STOP_GRACE_SECONDS,
    UNRESPONSIVE_AFTER_SECONDS,
    EngineFailure,
    EngineProcess,
    Placement,
    render,
)
from lab.hpa import Scale
from lab.rehearsal.coldstart import ColdStart as ColdStart  # where the report and prediction read it

log = logging.getLogger(__name__)

# Wall seconds a stopping engine gets between SIGTERM and SIGKILL when the rehearsal itself is ending.
_CLOSING_GRACE: Final = 10.0


class Phase(enum.Enum):
    """Where a replica is in its life."""

    PENDING = "pending"
    """Created; waiting for a free GPU."""
    LOADING = "loading"
    READY = "ready"
    DRAINING = "draining"
    FAILED = "failed"
    """Died or stopped answering after Ready: out of the router and the counts, being stopped."""
    STOPPED = "stopped"


class Replica:
    """One replica: its process, its phase, its measured cold start."""

    def __init__(self, record: ColdStart) -> None:
        self.record = record
        self.phase = Phase.PENDING
        self.engine: EngineProcess | None = None
        self.task: asyncio.Task[None] | None = None
        self.retire = asyncio.Event()
        self.settled = asyncio.Event()
        """Set once it is Ready or stopped (no longer pending or loading)."""

    def enter(self, phase: Phase) -> None:
        self.phase = phase
        if phase in (Phase.READY, Phase.STOPPED):
            self.settled.set()

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def url(self) -> str:
        assert self.engine is not None
        return self.engine.url

    @property
    def metrics_url(self) -> str:
        return self.url + "/metrics"


class EngineFleet:
    """`spec.replicas` over engine processes started from `template`."""

    def __init__(
        self,
        template: str,
        pool: PlacementPool,
        clock: ScaledClock,
        session: aiohttp.ClientSession,
        logs: Path,
        *,
        idle: Callable[[str], Awaitable[None]],
        on_ready: Callable[[Replica], None],
        on_retire: Callable[[Replica], None],
        grace: float,
        ready_within: float,
        on_fail: Callable[[Replica], object] = lambda replica: None,
        unresponsive_after: float = UNRESPONSIVE_AFTER_SECONDS,
    ) -> None:
        render(template, Placement(0))  # a template that cannot be rendered fails before anything starts
        self.template = template
        self.pool = pool
        self.clock = clock
        self.session = session
        self.logs = logs
        self.idle = idle
        """Waits until the router has nothing in flight on a replica (by name): what a drain waits for."""
        self.on_ready = on_ready
        self.on_retire = on_retire
        self.grace = grace
        self.ready_within = ready_within
        self.on_fail = on_fail
        """Told of a Ready replica found dead or unresponsive (the router drops it and its requests)."""
        self.unresponsive_after = unresponsive_after
        self.desired = 0
        self.replicas: list[Replica] = []
        """Replicas that count: pending, loading or Ready (not draining or stopped)."""
        self.every: list[Replica] = []
        """Every replica ever created, in order."""
        self.failure: asyncio.Future[EngineFailure] = asyncio.get_running_loop().create_future()
        """Set when an engine would not start: the rehearsal ends with it."""
        self._closing = False

    @property
    def ready_replicas(self) -> list[Replica]:
        """The Ready replicas (what the adapter's discovery lists, as an EndpointSlice would)."""
        return [r for r in self.replicas if r.phase is Phase.READY]

    def scale(self) -> Scale:
        """The `/scale` subresource: spec.replicas, existing and Ready replicas."""
        return Scale(self.desired, len(self.replicas), len(self.ready_replicas))

    async def start(self, replicas: int) -> None:
        """The replicas that exist before the load: started and Ready when this returns."""
        self.desired = replicas
        started = [self._add(initial=True) for _ in range(replicas)]
        ready: asyncio.Future[Any] = asyncio.gather(*(r.settled.wait() for r in started))
        waited: list[asyncio.Future[Any]] = [ready, self.failure]
        done, _ = await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        if self.failure in done:
            ready.cancel()
            raise self.failure.result()

    async def scale_to(self, replicas: int) -> None:
        """What the Deployment and its ReplicaSet do with a new `spec.replicas`."""
        if replicas < 0:
            raise ValueError(f"replicas {replicas!r} must be >= 0")
        self.desired = replicas
        while len(self.replicas) < replicas:
            self._add()
        excess = len(self.replicas) - replicas
        if excess <= 0:
            return
        loading = [r for r in self.replicas if r.phase is not Phase.READY]
        serving = [r for r in self.replicas if r.phase is Phase.READY]
        for victim in (list(reversed(loading)) + list(reversed(serving)))[:excess]:
            self.replicas.remove(victim)
            victim.record.retired = self.clock.now()
            if victim.phase is Phase.READY:
                victim.enter(Phase.DRAINING)
                self.on_retire(victim)
            victim.retire.set()

    def _add(self, *, initial: bool = False) -> Replica:
        replica = Replica(ColdStart(f"r{len(self.every) + 1}", self.clock.now(), initial=initial))
        self.replicas.append(replica)
        self.every.append(replica)
        replica.task = asyncio.create_task(self._live(replica), name=f"replica-{replica.name}")
        return replica

    async def _live(self, replica: Replica) -> None:
        """A replica's whole life, from a free GPU to its process's end."""
        try:
            async with self.pool.lease() as leased:
                if replica.retire.is_set():
                    return
                try:
                    # A fresh port each attempt, held until the engine binds it, another if it was taken.
                    healthy = await on_a_free_port(
                        lambda port: self._load(replica, Placement(port, leased.gpu)),
                        retried=lambda port, failure: self._port_retried(replica),
                    )
                    if healthy and replica.engine is not None:
                        await self._ready(replica, replica.engine)
                finally:
                    if replica.engine is not None:
                        await asyncio.shield(self._stop(replica, replica.engine))
        except EngineFailure as failure:
            if not self.failure.done():
                self.failure.set_result(failure)
        finally:
            replica.enter(Phase.STOPPED)

    def _port_retried(self, replica: Replica) -> None:
        replica.record.port_retries += 1

    async def _load(self, replica: Replica, placement: Placement) -> bool:
        """Start its engine on `placement` and wait until healthy (True) or taken away while loading."""
        record = replica.record
        record.port, record.gpu = placement.port, placement.gpu
        engine = EngineProcess.from_template(
            self.template, placement, self.logs / f"{replica.name}-{placement.port}.log"
        )
        replica.engine = engine
        replica.enter(Phase.LOADING)
        await engine.spawn()
        record.spawned = self.clock.now()
        healthy: asyncio.Future[Any] = asyncio.ensure_future(
            engine.wait_healthy(self.session, self.ready_within)
        )
        retired: asyncio.Future[Any] = asyncio.ensure_future(replica.retire.wait())
        try:
            await asyncio.wait([healthy, retired], return_when=asyncio.FIRST_COMPLETED)
        finally:
            retired.cancel()
        if not healthy.done():  # taken away while loading: it never serves
            healthy.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await healthy
            return False
        if healthy.exception() is not None:
            await engine.stop()  # gone already (it exited) or stuck: reaped before another try
        healthy.result()  # raises EngineFailure
        return True

    async def _ready(self, replica: Replica, engine: EngineProcess) -> None:
        """Serve until retired (then drain) or until the engine dies or stops answering (failed)."""
        replica.record.healthy = self.clock.now()
        replica.enter(Phase.READY)
        self.on_ready(replica)
        watching = asyncio.ensure_future(engine.watch(self.session, self.unresponsive_after))
        retired: asyncio.Future[Any] = asyncio.ensure_future(replica.retire.wait())
        try:
            await asyncio.wait([watching, retired], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (watching, retired):
                task.cancel()
            await asyncio.gather(watching, retired, return_exceptions=True)
        gone = watching.done() and not watching.cancelled() and watching.exception() is None
        if gone and replica.phase is Phase.READY:
            self._failed(replica, watching.result())
            return
        await self._drain(replica)

    def _failed(self, replica: Replica, reason: str) -> None:
        """What Kubernetes does with a pod that stops being Ready for good: out of the Service's
        endpoints and the Ready count, and a new pod for the ReplicaSet's count."""
        log.warning("replica %s failed: %s", replica.name, reason)
        replica.record.failed, replica.record.failure = self.clock.now(), reason
        replica.enter(Phase.FAILED)
        self.on_fail(replica)
        if replica in self.replicas:
            self.replicas.remove(replica)
        if not self._closing:
            while len(self.replicas) < self.desired:
                self._add()

    @property
    def failed(self) -> list[ColdStart]:
        """The replicas found dead or unresponsive after Ready."""
        return [r.record for r in self.every if r.record.failed is not None]

    async def _drain(self, replica: Replica) -> None:
        """Wait until the router has nothing in flight on it, for up to the grace period."""
        if self._closing:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.clock.real(self.grace)):
                await self.idle(replica.name)

    async def _stop(self, replica: Replica, engine: EngineProcess) -> None:
        await engine.stop(_CLOSING_GRACE if self._closing else STOP_GRACE_SECONDS)
        if engine.process is not None:
            replica.record.stopped = self.clock.now()

    def served(self, name: str) -> None:
        """The router saw replica `name` serve a token: its first one ends its cold start."""
        for replica in self.every:
            if replica.name == name and replica.record.first_token is None:
                replica.record.first_token = self.clock.now()

    async def close(self) -> None:
        """Stop every replica now, without a drain, and wait for their processes to end; whatever
        still runs after that is killed."""
        self._closing = True
        for replica in self.every:
            if replica.phase is Phase.READY:
                self.on_retire(replica)
            replica.retire.set()
        tasks = [r.task for r in self.every if r.task is not None and not r.task.done()]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=_CLOSING_GRACE * 2)
            for task in late:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self.kill_now()

    def kill_now(self) -> None:
        """SIGKILL every engine's process group, without waiting (an exiting interpreter's last act)."""
        for replica in self.every:
            if replica.engine is not None:
                replica.engine.kill_now()

    def held_seconds(self, end: float) -> float:
        """Emulated seconds of GPU held, summed over every engine started."""
        return sum(r.record.held(end) for r in self.every)
