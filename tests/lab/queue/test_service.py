"""Requests through the queue to emulated vLLM replicas: `QueueService` (producers) and `ConsumerPool`
(one consumer per Ready replica, drained before its replica stops)."""

from __future__ import annotations

import asyncio

import pytest

from lab import virtual_time
from lab.emulator import EmulatedFleet, EngineParams
from lab.queue import ConsumerPool, DeadLettered, Job, MessageQueue, QueueService
from tests.waiting import until

PARAMS = EngineParams(max_num_seqs=4, num_gpu_blocks=600, step_base_seconds=0.02)


def jobs(fleet: EmulatedFleet) -> MessageQueue[Job]:
    dlq: MessageQueue[Job] = MessageQueue("requests-dlq", fleet.clock)
    return MessageQueue(
        "requests", fleet.clock, visibility_timeout=60.0, max_receive_count=2, dead_letter=dlq
    )


async def test_a_request_waits_in_the_queue_until_a_replica_is_ready_then_completes() -> None:
    """No replica, no consumer: the message waits (nothing fails); the first replica's consumer starts
    when it is Ready, after its cold start, and runs it."""
    fleet = EmulatedFleet(params=PARAMS, load_delay=30.0, time_scale=200.0)
    queue = jobs(fleet)
    service = QueueService(queue)
    pool = ConsumerPool(queue, service.work_for, concurrency=4)
    try:
        request = asyncio.create_task(service.complete(300, 16, ignore_eos=True))
        await until(lambda: queue.visible == 1, what="the message queued")
        replica = await fleet.add_replica()
        pool.started(replica)
        assert pool.pulling == 0
        done = await asyncio.wait_for(request, timeout=10.0)
        assert done.num_output == 16 and done.finish_reason == "length"
        assert pool.pulling == 1
        [message_id] = queue.accounted()
        assert queue.accounted()[message_id] == "deleted"
    finally:
        await pool.stop()
        await fleet.stop()


async def test_a_poison_request_ends_in_the_dead_letter_queue_and_its_producer_hears_of_it() -> None:
    fleet = EmulatedFleet(params=PARAMS, time_scale=500.0)
    queue = jobs(fleet)
    service = QueueService(queue)
    pool = ConsumerPool(queue, service.work_for, concurrency=4)
    try:
        pool.started(await fleet.add_replica())
        too_long = PARAMS.max_model_len + 1
        with pytest.raises(DeadLettered, match="received 2 times"):
            await asyncio.wait_for(service.complete(too_long, 16), timeout=10.0)
        assert queue.dead_letter is not None and queue.dead_letter.visible == 1
        assert queue.missing() == []
    finally:
        await pool.stop()
        await fleet.stop()


def test_pre_stop_drains_the_consumer_before_the_replica_stops_so_nothing_is_aborted() -> None:
    """The scale-down order: stop pulling, finish the requests held, then stop the engine. Every message
    is deleted after a finished request; none is aborted or left for a retry.

    On virtual time (`lab.virtual_time`): the four requests are in flight together for ~10 ms at 200x,
    which a poll on the wall clock missed on a loaded 2-core machine (its process was descheduled
    longer than that, the first four finished and the last two were pulled); on virtual time the
    poll sees every millisecond of the run however busy the machine is."""

    async def main() -> None:
        fleet = EmulatedFleet(params=PARAMS, time_scale=200.0, monotonic=virtual_time.loop_time)
        queue = jobs(fleet)
        service = QueueService(queue)
        pool = ConsumerPool(queue, service.work_for, concurrency=4)
        try:
            replica = await fleet.add_replica()
            pool.started(replica)
            requests = [asyncio.create_task(service.complete(200, 64, ignore_eos=True)) for _ in range(6)]
            await until(lambda: replica.inflight == 4, what="four requests on the replica")
            assert await pool.pre_stop(replica) == 0
            await replica.stop()
            finished = [r for r in requests if r.done()]
            assert len(finished) == 4
            assert all(r.result().finish_reason == "length" for r in finished)
            assert (queue.counts.deleted, queue.visible, queue.in_flight) == (4, 2, 0)
            assert pool.pulling == 0
            assert queue.missing() == []
            for request in requests:
                request.cancel()
            await asyncio.gather(*requests, return_exceptions=True)
        finally:
            await pool.stop()
            await fleet.stop()

    virtual_time.run(main())


async def test_a_replica_stopped_while_loading_never_gets_a_consumer() -> None:
    fleet = EmulatedFleet(params=PARAMS, load_delay=3600.0, time_scale=10.0)
    queue = jobs(fleet)
    pool = ConsumerPool(queue, QueueService(queue).work_for, concurrency=4)
    try:
        replica = await fleet.add_replica()
        pool.started(replica)
        assert await pool.pre_stop(replica) == 0
        assert pool.consumers == {} and pool.pulling == 0
    finally:
        await pool.stop()
        await fleet.stop()


def test_the_service_needs_a_dead_letter_queue() -> None:
    fleet = EmulatedFleet()
    with pytest.raises(ValueError, match="needs a dead-letter queue"):
        QueueService(MessageQueue("requests", fleet.clock))
