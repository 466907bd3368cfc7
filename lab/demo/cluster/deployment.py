"""The Deployment and its ReplicaSet, as the demo's fleet lives them: replicas start cold and stop gracefully.

What the HPA sees of it is the `/scale` subresource (`scale()`); what it changes is `spec.replicas`
(`scale_to`). Any count from 0 up is allowed: at 0 no replica exists, nothing serves, and the
next scale-up starts from a cold start.

A pod's lifecycle hooks (`PodHooks`) let something else live and die with each replica: the upstream
queue's consumer starts with it and is drained by its preStop hook, before the engine stops, within
the same grace period (terminationGracePeriodSeconds covers preStop and the shutdown after it).
"""

from __future__ import annotations

import asyncio
from typing import Final, Protocol

from lab.emulator import EmulatedFleet, EmulatedReplica
from lab.hpa import Scale

#: A terminating pod keeps serving what it has for up to terminationGracePeriodSeconds (30 by default).
GRACE_SECONDS: Final = 30.0


class PodHooks(Protocol):
    """What happens beside a replica's own start and stop (a container's postStart and preStop)."""

    def started(self, replica: EmulatedReplica) -> None:
        """The replica was created (it is loading)."""

    async def pre_stop(self, replica: EmulatedReplica, grace: float | None = None) -> int:
        """The replica is terminating: finish what must finish before its engine stops, within `grace`
        emulated seconds; returns what was left unfinished."""
        ...


class Deployment:
    """`spec.replicas` over an `EmulatedFleet`: adds replicas (with the fleet's cold start) and removes them
    as a ReplicaSet chooses."""

    def __init__(self, fleet: EmulatedFleet, hooks: PodHooks | None = None) -> None:
        self.fleet = fleet
        self.hooks = hooks
        self.desired = 0
        """`spec.replicas`: what the HPA last set (or the Deployment started with)."""
        self._stopping: set[asyncio.Task[None]] = set()

    def scale(self) -> Scale:
        """The `/scale` subresource the HPA reads: spec.replicas, existing and Ready replicas."""
        return Scale(self.desired, len(self.fleet.replicas), len(self.fleet.ready_replicas))

    async def start(self, replicas: int) -> None:
        """Replicas that existed before the demo: already loaded and Ready when this returns."""
        self.desired = replicas
        for _ in range(replicas):
            replica = await self.fleet.add_replica(load_delay=0.0)
            self._started(replica)
            await replica.wait_ready()

    def _started(self, replica: EmulatedReplica) -> None:
        if self.hooks is not None:
            self.hooks.started(replica)

    async def scale_to(self, replicas: int) -> None:
        """What the Deployment and its ReplicaSet do with a new `spec.replicas`."""
        if replicas < 0:
            raise ValueError(f"replicas {replicas!r} must be >= 0")
        self.desired = replicas
        fleet = self.fleet
        while len(fleet.replicas) < replicas:
            self._started(await fleet.add_replica())
        excess = len(fleet.replicas) - replicas
        if excess <= 0:
            return
        # The ReplicaSet deletes pods that are not Ready first, then the newest.
        loading = [r for r in fleet.replicas if not r.ready]
        serving = [r for r in fleet.replicas if r.ready]
        victims: list[EmulatedReplica] = (list(reversed(loading)) + list(reversed(serving)))[:excess]
        for victim in victims:
            # A terminating pod leaves status.replicas and its EndpointSlice's ready endpoints at once.
            fleet.replicas.remove(victim)
            task = asyncio.create_task(self._terminate(victim))
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    async def _terminate(self, replica: EmulatedReplica) -> None:
        """preStop, then the engine's own graceful stop with what is left of the grace period."""
        grace = GRACE_SECONDS
        if self.hooks is not None:
            began = self.fleet.clock.now()
            await self.hooks.pre_stop(replica, GRACE_SECONDS)
            grace = max(0.0, GRACE_SECONDS - (self.fleet.clock.now() - began))
        await replica.stop(grace)

    async def stopped(self) -> None:
        """Wait for the replicas being removed to finish their grace period."""
        await asyncio.gather(*self._stopping, return_exceptions=True)
