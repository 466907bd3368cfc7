"""The router: each request to the Ready replica with the fewest in flight; a drained one gets none.

The replicas and the router share a virtual-time loop (`lab.virtual_time`): time moves only while
everything waits, so "the first four requests are running and none has finished" is a state the
test reaches by waiting for it, not a sleep it hopes is long enough on a busy machine.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator

import aiohttp
import pytest

from lab import virtual_time
from lab.clock import ScaledClock
from lab.emulator import EmulatedFleet, EngineParams
from lab.engine.readiness import NoReadyReplica
from lab.rehearsal.router import Router
from lab.virtual_time import loop_time
from tests.waiting import until

# Slow steps on a fast clock: a request of 4 tokens lasts 4 emulated seconds (0.04 s of loop time).
PARAMS = EngineParams(max_num_seqs=8, step_base_seconds=1.0, step_per_seq_seconds=0.0, frontend_seconds=0.0)
SCALE = 100.0


@contextlib.asynccontextmanager
async def two_replicas(served: collections.Counter[str]) -> AsyncIterator[Router]:
    """A router over two emulated replicas, `a` and `b`, counting first tokens in `served`."""
    async with EmulatedFleet(model="m", params=PARAMS, time_scale=SCALE, monotonic=loop_time) as fleet:
        await fleet.start(2)
        await asyncio.gather(*(r.wait_ready() for r in fleet.replicas))
        async with aiohttp.ClientSession() as session:
            router = Router(
                session, "m", ScaledClock(SCALE, monotonic=loop_time), on_first_token=served.update
            )
            router.add("a", fleet.replicas[0].url)
            router.add("b", fleet.replicas[1].url)
            yield router


def test_requests_go_to_the_replica_with_the_fewest_in_flight() -> None:
    async def main() -> None:
        served: collections.Counter[str] = collections.Counter()
        async with two_replicas(served) as router:
            results = await asyncio.gather(*(router.complete([1000] * 16, 4) for _ in range(10)))
        assert all(r.error is None and r.output_tokens == 4 for r in results)
        # Ten at once over two idle replicas: five each, never six against four.
        assert served == {"a": 5, "b": 5}
        # One step of 1 s (± its jitter) to the first token. (On the wall clock this read `>= 1.0`,
        # which held only because loopback and the runner's ticks added a real millisecond or more.)
        shortest = PARAMS.step_base_seconds * (1 - PARAMS.step_jitter)
        assert all(r.ttft is not None and r.ttft >= shortest for r in results)

    virtual_time.run(main())


def test_a_removed_replica_finishes_its_requests_and_takes_no_new_ones() -> None:
    async def main() -> None:
        served: collections.Counter[str] = collections.Counter()
        async with two_replicas(served) as router:
            first = [asyncio.create_task(router.complete([1000] * 16, 20)) for _ in range(4)]
            # The four are sent; a request of 20 one-second steps runs 0.2 loop seconds, so none has
            # finished by the time this holds (the deadline is the first of them finishing).
            # The router signals no dispatch (only `idle`): polling is the wait, free on virtual time.
            await until(lambda: router.inflight("a") + router.inflight("b") == 4, 0.1, "four in flight")
            assert router.inflight("a") == 2
            router.remove("a")
            assert router.ready == ["b"]
            later = await asyncio.gather(*(router.complete([1000] * 16, 2) for _ in range(3)))
            assert router.inflight("a") == 2  # still running there
            await asyncio.wait_for(router.idle("a"), timeout=5)
            done = await asyncio.gather(*first)
        assert all(r.error is None for r in [*done, *later])
        assert served["a"] == 2 and served["b"] == 5

    virtual_time.run(main())


async def test_with_no_ready_replica_a_request_is_refused_at_once() -> None:
    async with aiohttp.ClientSession() as session:
        router = Router(session, "m", ScaledClock())
        with pytest.raises(NoReadyReplica):
            await router.complete([1], 1)
        await asyncio.wait_for(router.idle("unknown"), timeout=1)
