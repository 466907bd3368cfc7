"""The demo's clients (`lab.demo.cluster.traffic`) against a real emulated fleet: what each outcome
records."""

from __future__ import annotations

import asyncio

from lab.demo.cluster.traffic import Traffic
from lab.demo.cluster.upstream import QueueSettings, Upstream
from lab.demo.loadgen import SCENARIOS, Arrival
from lab.demo.request_log import RequestLog
from lab.demo.timeline import Timeline
from lab.emulator import EmulatedFleet
from tests.waiting import until

ARRIVAL = Arrival(at=0.0, stage="s", prompt_tokens=64, shared_prefix_tokens=0, max_tokens=8, seed=1)


def traffic(fleet: EmulatedFleet, log: RequestLog) -> Traffic:
    return Traffic(
        fleet, Timeline(fleet.clock), log, profile=SCENARIOS["smoke"], capacity=1.0, vocab_size=32000, seed=0
    )


async def test_a_served_request_records_its_latencies() -> None:
    """A request a Ready replica serves is `ok`, with its
    TTFT and its TPOT over the tokens after the first."""
    async with EmulatedFleet(time_scale=20.0) as fleet:
        replica = await fleet.add_replica()
        await replica.wait_ready()
        log = RequestLog()
        await traffic(fleet, log).send(ARRIVAL)
    (record,) = log.records
    assert record.outcome == "ok"
    assert record.ttft is not None and record.ttft > 0
    assert record.tpot is not None and 0 < record.tpot < 0.05  # a decode step of the calibrated engine
    assert log.take_counts() == (1, 1)


async def test_no_ready_replica_rejects_the_request() -> None:
    """With every replica still loading the Service has nowhere to send: the request fails as rejected."""
    async with EmulatedFleet(load_delay=3600.0) as fleet:
        await fleet.add_replica()
        log = RequestLog()
        await traffic(fleet, log).send(ARRIVAL)
    assert [(r.outcome, r.ttft) for r in log.records] == [("rejected", None)]
    assert log.take_counts() == (1, 0)


def queued(fleet: EmulatedFleet, log: RequestLog, *, poison: float = 0.0) -> tuple[Traffic, Upstream]:
    upstream = Upstream(QueueSettings(visibility_timeout=10.0, max_receive_count=2, poison=poison), fleet)
    clients = Traffic(
        upstream,
        Timeline(fleet.clock),
        log,
        profile=SCENARIOS["zero-idle"],
        capacity=1.0,
        vocab_size=32000,
        seed=0,
        poison=poison,
        poison_tokens=fleet.params.max_model_len + 1,
    )
    return clients, upstream


async def test_through_the_queue_a_request_waits_for_a_replica_and_its_ttft_counts_the_wait() -> None:
    """No replica exists when the request is sent: it waits in the queue (it is not rejected), and the
    TTFT the client records runs from its sending, so the replica's cold start is in it."""
    async with EmulatedFleet(load_delay=30.0, time_scale=200.0) as fleet:
        log = RequestLog()
        clients, upstream = queued(fleet, log)
        sending = asyncio.create_task(clients.send(ARRIVAL))
        await until(lambda: upstream.queue.visible == 1, what="the message queued")
        upstream.started(await fleet.add_replica())
        await asyncio.wait_for(sending, timeout=10.0)
        await upstream.pool.stop()
    (record,) = log.records
    assert record.outcome == "ok"
    assert record.ttft is not None and record.ttft > 30.0


async def test_a_request_the_dead_letter_queue_took_is_recorded_as_rejected() -> None:
    """A poison request (a prompt beyond max_model_len) fails on every receive and goes to the DLQ; its
    client records it as rejected, and the queue accounts for it."""
    async with EmulatedFleet(time_scale=500.0) as fleet:
        log = RequestLog()
        clients, upstream = queued(fleet, log, poison=1.0)
        upstream.started(await fleet.add_replica())
        await asyncio.wait_for(clients.send(ARRIVAL), timeout=10.0)
        await upstream.pool.stop()
    assert [r.outcome for r in log.records] == ["rejected"]
    assert upstream.gauges() == {"queue_depth": 0, "dlq_depth": 1, "consumers": 0, "messages_lost": 0}
