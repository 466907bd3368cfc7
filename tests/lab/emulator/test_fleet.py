"""A fleet of emulated replicas: consecutive ports, scaling at runtime, round-robin requests."""

from __future__ import annotations

import asyncio

import pytest

from lab.emulator.fleet import EmulatedFleet
from lab.emulator.params import EngineParams
from lab.engine.placement import free_port_range
from lab.engine.readiness import NoReadyReplica

PARAMS = EngineParams(eos_probability=0.0)


async def test_replicas_listen_on_consecutive_ports_from_the_base() -> None:
    """With base_port P the replicas listen on P, P+1, P+2."""
    base = free_port_range(3)
    async with EmulatedFleet(params=PARAMS, base_port=base) as fleet:
        await fleet.start(3)
        assert [r.port for r in fleet.replicas] == [base, base + 1, base + 2]
        assert fleet.metrics_urls == [f"http://127.0.0.1:{base + i}/metrics" for i in range(3)]


async def test_scaling_adds_cold_replicas_and_removes_loading_then_newest() -> None:
    """Added replicas become Ready after the load delay; a scale-down removes a loading replica
    first, else the newest (a ReplicaSet's choice), and ports are not reused."""
    async with EmulatedFleet(params=PARAMS, load_delay=0.0, time_scale=100.0) as fleet:
        await fleet.start(2)
        first, second = fleet.replicas
        slow = await fleet.add_replica(load_delay=3600.0)
        async with asyncio.timeout(5):
            await first.wait_ready()
            await second.wait_ready()
        assert fleet.ready_replicas == [first, second]
        await fleet.scale_to(2)
        assert fleet.replicas == [first, second] and not slow.ready
        await fleet.scale_to(1)
        assert fleet.replicas == [first]
        third = await fleet.add_replica()
        assert third.port not in (first.port, second.port, slow.port) or third.port == 0
        await fleet.scale_to(0)
        assert fleet.replicas == []


async def test_direct_requests_go_round_robin_over_ready_replicas() -> None:
    """complete() spreads requests evenly over the Ready replicas."""
    async with EmulatedFleet(params=PARAMS, time_scale=100.0) as fleet:
        await fleet.start(3)
        for replica in fleet.replicas:
            await replica.wait_ready()
        results = await asyncio.gather(*(fleet.complete(50, 5) for _ in range(9)))
        assert all(r.finish_reason == "length" for r in results)
        assert [sum(r.engine.stats.request_success.values()) for r in fleet.replicas] == [3, 3, 3]


async def test_no_ready_replica_is_an_error() -> None:
    """Requests fail fast while every replica is still loading."""
    async with EmulatedFleet(params=PARAMS, load_delay=3600.0) as fleet:
        await fleet.start(1)
        with pytest.raises(NoReadyReplica, match="no ready replica of 'emulated-model' \\(1 loading\\)"):
            await fleet.complete(10, 1)


async def test_replicas_share_the_fleet_clock_and_differ_by_seed() -> None:
    """All replicas read one emulated clock; each gets its own seed so their jitter differs."""
    async with EmulatedFleet(params=PARAMS, seed=5) as fleet:
        await fleet.start(2)
        a, b = fleet.replicas
        assert a.clock is b.clock is fleet.clock
        assert a.engine._rng.random() != b.engine._rng.random()


async def test_negative_replica_count_is_refused() -> None:
    """scale_to names the bad count."""
    async with EmulatedFleet(params=PARAMS) as fleet:
        with pytest.raises(ValueError, match="replicas -1 must be >= 0"):
            await fleet.scale_to(-1)
