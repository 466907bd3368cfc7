"""The router when a replica fails under its requests (`Router.fail`): it leaves at once, and each
request in flight on it is retried once elsewhere (no token yet) or failed (tokens sent), counted.

On virtual time (`lab.virtual_time`): the state the failure must hit (four requests in flight on one
replica, two of them streaming) lasts 0.3 s of a 20x clock; on the wall clock a worker descheduled
for longer on a loaded machine would miss it. As in test_router.py, the loop's time is the router's
and the fleet's clock."""

from __future__ import annotations

import asyncio
import collections

import aiohttp

from lab import virtual_time
from lab.clock import ScaledClock
from lab.emulator import EmulatedFleet, EngineParams
from lab.rehearsal.router import Router
from tests.waiting import until

# One emulated second a step at 20x: a 6-token request streams for 0.3 s of wall time.
PARAMS = EngineParams(max_num_seqs=8, step_base_seconds=1.0, step_per_seq_seconds=0.0, frontend_seconds=0.0)
SCALE = 20.0


def test_a_failed_replicas_requests_are_retried_once_or_failed_and_every_one_is_counted() -> None:
    virtual_time.run(_fail_under_requests())


async def _fail_under_requests() -> None:
    served: collections.Counter[str] = collections.Counter()
    fleet = EmulatedFleet(model="m", params=PARAMS, time_scale=SCALE, monotonic=virtual_time.loop_time)
    async with fleet:
        await fleet.start(2)
        await asyncio.gather(*(r.wait_ready() for r in fleet.replicas))
        async with aiohttp.ClientSession() as session:
            clock = ScaledClock(SCALE, monotonic=virtual_time.loop_time)
            router = Router(session, "m", clock, on_first_token=served.update)
            router.add("a", fleet.replicas[0].url)
            router.add("b", fleet.replicas[1].url)
            early = [asyncio.create_task(router.complete([1000] * 8, 6)) for _ in range(4)]
            # tokens flow on a: these will be cut off
            await until(lambda: served["a"] >= 2, 10.0, "tokens from a")
            late = [asyncio.create_task(router.complete([1000] * 8, 6)) for _ in range(4)]
            await until(lambda: router.inflight("a") >= 3, 10.0, "three in flight on a")
            on_a = router.inflight("a")
            with_token = served["a"]
            assert router.fail("a") == on_a
            assert router.ready == ["b"] and router.inflight("a") == 0
            results = await asyncio.gather(*early, *late)
    counts = router.counts
    # Every request on a is either retried (no token yet) or failed (tokens sent); none is lost.
    assert counts.retried + counts.cut_off == on_a and counts.cut_off <= with_token and counts.cut_off >= 1
    assert counts.lost_retry == 0
    failed = [r for r in results if r.error is not None]
    assert len(failed) == counts.cut_off and all(r.ttft is not None for r in failed), failed
    assert all(r.output_tokens == 6 for r in results if r.error is None)
    assert len(results) == 8


async def test_a_failed_replica_unknown_to_the_router_changes_nothing() -> None:
    async with aiohttp.ClientSession() as session:
        router = Router(session, "m", ScaledClock(1.0))
        assert router.fail("nobody") == 0 and router.counts.retried == 0
