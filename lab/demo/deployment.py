"""The Deployment and its ReplicaSet, as the demo's fleet lives them: replicas start cold and stop gracefully.

What the HPA sees of it is the `/scale` subresource (`scale()`); what it changes is `spec.replicas`
(`scale_to`). Any count from 0 up is allowed: at 0 no replica exists, nothing serves, and the
next scale-up starts from a cold start.
"""

from __future__ import annotations

import asyncio
from typing import Final

from lab.emulator import EmulatedFleet, EmulatedReplica
from lab.hpa import Scale

#: A terminating pod keeps serving what it has for up to terminationGracePeriodSeconds (30 by default).
GRACE_SECONDS: Final = 30.0


class Deployment:
    """`spec.replicas` over an `EmulatedFleet`: adds replicas (with the fleet's cold start) and removes them
    as a ReplicaSet chooses."""

    def __init__(self, fleet: EmulatedFleet) -> None:
        self.fleet = fleet
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
            await replica.wait_ready()

    async def scale_to(self, replicas: int) -> None:
        """What the Deployment and its ReplicaSet do with a new `spec.replicas`."""
        if replicas < 0:
            raise ValueError(f"replicas {replicas!r} must be >= 0")
        self.desired = replicas
        fleet = self.fleet
        while len(fleet.replicas) < replicas:
            await fleet.add_replica()
        excess = len(fleet.replicas) - replicas
        if excess <= 0:
            return
        # The ReplicaSet deletes pods that are not Ready first, then the newest.
        loading = [r for r in fleet.replicas if not r.ready]
        serving = [r for r in fleet.replicas if r.ready]
        victims: list[EmulatedReplica] = (list(reversed(loading)) + list(reversed(serving)))[:excess]
        for victim in victims:
            task = asyncio.create_task(fleet.remove_replica(victim, drain_timeout=GRACE_SECONDS))
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        await asyncio.sleep(0)  # let the removals take the victims out of the fleet's list

    async def stopped(self) -> None:
        """Wait for the replicas being removed to finish their grace period."""
        await asyncio.gather(*self._stopping, return_exceptions=True)
