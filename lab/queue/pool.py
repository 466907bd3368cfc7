"""One consumer per Ready replica, started when the replica becomes Ready and drained before it stops.

The pool is the pod's lifecycle as the queue sees it: `started(replica)` is the postStart side (a
consumer that begins pulling once its vLLM answers, as a readiness-gated worker does) and
`pre_stop(replica)` the preStop hook (stop pulling, finish what is held) that a Deployment runs before
the replica's engine stops. A replica removed while still loading never had a consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Generic, TypeVar

from lab.emulator import EmulatedReplica
from lab.queue.broker import MessageQueue
from lab.queue.consumer import Consumer, Work

T = TypeVar("T")


class ConsumerPool(Generic[T]):
    """Consumers of `queue`, one per Ready replica;
    `work_for(replica)` is what a consumer does with a message."""

    def __init__(
        self, queue: MessageQueue[T], work_for: Callable[[EmulatedReplica], Work[T]], *, concurrency: int
    ) -> None:
        self.queue = queue
        self.work_for = work_for
        self.concurrency = concurrency
        self.consumers: dict[EmulatedReplica, Consumer[T]] = {}
        self._waiting: dict[EmulatedReplica, asyncio.Task[None]] = {}

    @property
    def pulling(self) -> int:
        """Consumers taking new messages (draining ones excluded)."""
        return sum(1 for c in self.consumers.values() if c.pulling)

    def started(self, replica: EmulatedReplica) -> None:
        """A replica was created: give it a consumer as soon as it is Ready."""
        if replica not in self._waiting and replica not in self.consumers:
            self._waiting[replica] = asyncio.create_task(self._when_ready(replica))

    async def _when_ready(self, replica: EmulatedReplica) -> None:
        await replica.wait_ready()
        consumer = Consumer(
            self.queue, self.work_for(replica), concurrency=self.concurrency, name=f"consumer-{replica.port}"
        )
        self.consumers[replica] = consumer
        self._waiting.pop(replica, None)
        consumer.start()

    async def pre_stop(self, replica: EmulatedReplica, grace: float | None = None) -> int:
        """Drain the replica's consumer (up to `grace` emulated seconds); returns the messages it still
        held, which the queue hands out again after their visibility timeout."""
        waiting = self._waiting.pop(replica, None)
        if waiting is not None:
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
        consumer = self.consumers.get(replica)
        if consumer is None:
            return 0
        try:
            return await consumer.drain(grace)
        finally:
            # A consumer is not stopped twice: only the replica's stop remains after its preStop.
            self.consumers.pop(replica, None)

    async def stop(self) -> None:
        """Stop every consumer at once (the end of a run); what they hold stays in flight in the queue."""
        for task in self._waiting.values():
            task.cancel()
        await asyncio.gather(*self._waiting.values(), return_exceptions=True)
        self._waiting.clear()
        await asyncio.gather(*(c.stop() for c in self.consumers.values()))
        self.consumers.clear()
