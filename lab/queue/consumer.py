"""A queue consumer: pulls messages for one vLLM replica, at most `concurrency` at a time, and deletes
each only once its work succeeded.

Deleting after the work (not before) is what makes the queue durable: a consumer whose replica dies,
whose request is refused or who is stopped in the middle leaves the message in flight, and the queue
hands it out again after its visibility timeout. `drain` is the consumer's part of a graceful stop
(what the chart's vLLM preStop hook does for HTTP): stop pulling, let what it holds finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Final, Generic, TypeVar

from lab.queue.broker import Message, MessageQueue

log = logging.getLogger(__name__)

T = TypeVar("T")

#: `work(message)` does what the message asks and says whether it succeeded; raising counts as failing
Work = Callable[[Message[T]], Awaitable[bool]]

#: Long-poll wait of one receive (SQS allows up to 20 s): an idle consumer asks about once per this.
POLL_SECONDS: Final = 20.0


class Consumer(Generic[T]):
    """Pulls from `queue` and hands each message to `work`, keeping at most `concurrency` in flight."""

    def __init__(
        self, queue: MessageQueue[T], work: Work[T], *, concurrency: int, name: str = "consumer"
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"consumer {name!r} concurrency {concurrency!r} must be >= 1")
        self.queue = queue
        self.work = work
        self.concurrency = concurrency
        self.name = name
        self.succeeded = 0
        self.failed = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._slot = asyncio.Event()
        self._puller: asyncio.Task[None] | None = None
        self._draining = False

    @property
    def in_flight(self) -> int:
        """Messages received and still being worked on."""
        return len(self._tasks)

    @property
    def pulling(self) -> bool:
        """Started and not draining: it takes new messages."""
        return self._puller is not None and not self._draining

    def start(self) -> None:
        """Begin pulling (once)."""
        if self._puller is None and not self._draining:
            self._puller = asyncio.create_task(self._pull(), name=f"{self.name}-pull")

    async def _pull(self) -> None:
        while True:
            free = self.concurrency - len(self._tasks)
            if free <= 0:
                self._slot.clear()
                await self._slot.wait()
                continue
            # Cancelling the poll (drain) cannot drop a message: receive_wait takes messages only in
            # its last, synchronous step, and the tasks below start before anything awaits again.
            for message in await self.queue.receive_wait(free, POLL_SECONDS):
                task = asyncio.create_task(self._process(message), name=f"{self.name}-{message.id}")
                self._tasks.add(task)
                task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slot.set()

    async def _process(self, message: Message[T]) -> None:
        try:
            ok = await self.work(message)
        except Exception as error:  # a failed message is retried after its timeout, never dropped
            log.info("%s: %s failed (receive %d): %s", self.name, message.id, message.receive_count, error)
            ok = False
        if ok and self.queue.delete(message):
            self.succeeded += 1
        elif not ok:
            self.failed += 1

    async def drain(self, grace: float | None = None) -> int:
        """Stop pulling and wait for the messages held to finish, up to `grace` emulated seconds (no
        limit when `None`); returns how many were still unfinished (they stay in flight in the queue and
        come back after their visibility timeout)."""
        self._draining = True
        if self._puller is not None:
            self._puller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._puller
        if self._tasks:
            wait = None if grace is None else self.queue.clock.real(grace)
            await asyncio.wait(set(self._tasks), timeout=wait)
        return len(self._tasks)

    async def stop(self) -> None:
        """Drain without waiting: abandon what is held (it comes back after its visibility timeout)."""
        await self.drain(0.0)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
