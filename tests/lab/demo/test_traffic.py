"""The demo's clients (`lab.demo.traffic`) against a real emulated fleet: what each outcome records."""

from __future__ import annotations

from lab.demo.request_log import RequestLog
from lab.demo.timeline import Timeline
from lab.demo.traffic import Traffic
from lab.emulator import EmulatedFleet
from lab.loadgen import PROFILES, Arrival

ARRIVAL = Arrival(at=0.0, stage="s", prompt_tokens=64, shared_prefix_tokens=0, max_tokens=8, seed=1)


def traffic(fleet: EmulatedFleet, log: RequestLog) -> Traffic:
    return Traffic(
        fleet, Timeline(fleet.clock), log, profile=PROFILES["smoke"], capacity=1.0, vocab_size=32000, seed=0
    )


async def test_a_served_request_records_its_latencies() -> None:
    """A request a Ready replica serves is `ok`, with its TTFT and its TPOT over the tokens after the first."""
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
