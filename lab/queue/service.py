"""Requests through the queue: producers send a `Job`, a consumer runs it on its vLLM replica.

`QueueService.complete` has the signature of a Service's (`lab.demo.traffic.Service`), so the demo's
clients send through the queue unchanged: the call enqueues a message and returns when a consumer has
finished the request, however many receives that took (or raises `DeadLettered` when the redrive policy
gave up on it). `work_for(replica)` is the consumer's side: run the job on that replica and say whether
it succeeded; any failure leaves the message to come back after its visibility timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from lab.emulator import EmulatedReplica, Request
from lab.queue.broker import Message, MessageQueue
from lab.queue.consumer import Work


class DeadLettered(Exception):
    """The message was received `max_receive_count` times
    without success and moved to the dead-letter queue."""


@dataclass(eq=False)
class Job:
    """A completion request as a message body, with the producer's handle on its outcome."""

    prompt: Sequence[int] | int
    max_tokens: int | None
    ignore_eos: bool
    outcome: asyncio.Future[Request] = field(repr=False)
    """Resolved by the first successful run (a message may be processed twice), or with `DeadLettered`."""


class QueueService:
    """The Service the clients send to when an upstream queue sits in front of the fleet."""

    def __init__(self, queue: MessageQueue[Job]) -> None:
        if queue.dead_letter is None:
            raise ValueError(
                f"queue {queue.name!r} needs a dead-letter queue for the producers to learn of failures"
            )
        self.queue = queue
        queue.on_dead_letter = self._dead_lettered

    async def complete(
        self, prompt: Sequence[int] | int, max_tokens: int | None = None, *, ignore_eos: bool = False
    ) -> Request:
        """Send the request as a message and wait until a consumer has finished it; raises `DeadLettered`."""
        return await asyncio.shield(self.send(prompt, max_tokens, ignore_eos=ignore_eos).body.outcome)

    def send(
        self, prompt: Sequence[int] | int, max_tokens: int | None = None, *, ignore_eos: bool = False
    ) -> Message[Job]:
        """Send the request as a message; its `body.outcome` resolves as `complete` returns."""
        outcome: asyncio.Future[Request] = asyncio.get_running_loop().create_future()
        return self.queue.send(Job(prompt, max_tokens, ignore_eos, outcome))

    def _dead_lettered(self, message: Message[Job]) -> None:
        outcome = message.body.outcome
        if not outcome.done():
            outcome.set_exception(
                DeadLettered(f"message {message.id} received {message.receive_count} times without success")
            )

    @staticmethod
    def work_for(replica: EmulatedReplica) -> Work[Job]:
        """What a consumer of `replica` does with a message: run the request there; success is a request
        that finished (not aborted). Refusals (loading, stopped, 503, 400) raise and count as failures."""

        async def work(message: Message[Job]) -> bool:
            job = message.body
            request = await replica.complete(job.prompt, job.max_tokens, ignore_eos=job.ignore_eos)
            if request.finish_reason == "abort":
                return False
            if not job.outcome.done():
                job.outcome.set_result(request)
            return True

        return work
