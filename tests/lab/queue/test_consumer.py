"""A consumer (`lab.queue.consumer`): the concurrency limit, delete-after-success, retries of failures,
and `drain`, the graceful stop that finishes what it holds and takes nothing new."""

from __future__ import annotations

import asyncio

import pytest

from lab.clock import ScaledClock
from lab.queue import Consumer, Message, MessageQueue
from tests.waiting import until


def queue(visibility: float = 30.0) -> MessageQueue[str]:
    clock = ScaledClock(1000.0)
    dlq: MessageQueue[str] = MessageQueue("jobs-dlq", clock)
    return MessageQueue("jobs", clock, visibility_timeout=visibility, max_receive_count=2, dead_letter=dlq)


class Gate:
    """Work that holds each message until the test opens the gate; records what it was given."""

    def __init__(self, ok: bool = True) -> None:
        self.open = asyncio.Event()
        self.ok = ok
        self.seen: list[str] = []

    async def __call__(self, message: Message[str]) -> bool:
        self.seen.append(message.body)
        await self.open.wait()
        return self.ok


async def test_at_most_concurrency_messages_are_held_and_each_is_deleted_after_success() -> None:
    jobs = queue()
    for body in "abcde":
        jobs.send(body)
    work = Gate()
    consumer = Consumer(jobs, work, concurrency=2)
    consumer.start()
    try:
        await until(lambda: consumer.in_flight == 2, what="two messages in flight")
        assert (jobs.visible, jobs.in_flight, work.seen) == (3, 2, ["a", "b"])
        work.open.set()
        await until(lambda: consumer.succeeded == 5, what="all five done")
        assert (jobs.visible, jobs.in_flight, jobs.counts.deleted, consumer.failed) == (0, 0, 5, 0)
    finally:
        await consumer.stop()


@pytest.mark.parametrize("failure", ["returns False", "raises"])
async def test_a_failed_message_is_not_deleted_and_comes_back_until_the_dead_letter_queue_takes_it(
    failure: str,
) -> None:
    jobs = queue(visibility=20.0)
    jobs.send("poison")

    async def work(message: Message[str]) -> bool:
        if failure == "raises":
            raise ValueError("prompt longer than max_model_len")
        return False

    consumer = Consumer(jobs, work, concurrency=4)
    consumer.start()
    try:
        assert jobs.dead_letter is not None
        dead_letter = jobs.dead_letter
        await until(lambda: dead_letter.visible == 1, what="the message in the DLQ")
        assert consumer.failed == 2 and jobs.counts.received == 2
        assert jobs.missing() == []
    finally:
        await consumer.stop()


async def test_drain_takes_nothing_new_and_finishes_what_it_holds() -> None:
    """The preStop side: after `drain` starts, new messages stay in the queue for other consumers, and
    the ones held are finished and deleted before `drain` returns."""
    jobs = queue()
    jobs.send("held")
    work = Gate()
    consumer = Consumer(jobs, work, concurrency=4)
    consumer.start()
    await until(lambda: consumer.in_flight == 1, what="one message held")
    draining = asyncio.create_task(consumer.drain())
    await until(lambda: not consumer.pulling, what="the consumer to stop pulling")
    jobs.send("later")
    work.open.set()
    assert await asyncio.wait_for(draining, timeout=5.0) == 0
    assert work.seen == ["held"]
    assert (jobs.counts.deleted, jobs.visible, jobs.in_flight) == (1, 1, 0)


async def test_a_drain_cut_short_leaves_the_rest_in_flight_to_come_back() -> None:
    jobs = queue(visibility=30.0)
    jobs.send("slow")
    consumer = Consumer(jobs, Gate(), concurrency=1)
    consumer.start()
    await until(lambda: consumer.in_flight == 1, what="one message held")
    assert await consumer.drain(grace=1.0) == 1
    await consumer.stop()
    assert jobs.in_flight == 1
    await until(lambda: jobs.visible == 1, what="the message back after its visibility timeout")
    assert jobs.missing() == []


def test_a_consumer_needs_a_concurrency_of_at_least_one() -> None:
    with pytest.raises(ValueError, match="concurrency 0 must be >= 1"):
        Consumer(queue(), Gate(), concurrency=0)
