"""The rehearsal's Deployment of engine processes: started on scale-up, Ready when healthy, drained
and stopped on scale-down as a ReplicaSet chooses, every process ended however the run ends.

The engines are small Python servers standing in for `vllm serve`: each listens only after its load
delay (a cold start), so `/health` refuses connections until then, as a loading vLLM does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest

from lab.clock import ScaledClock
from lab.engine.placement import PlacementPool, placements
from lab.engine.process import EngineFailure
from lab.hpa import Scale
from lab.rehearsal.replicas import EngineFleet, Phase, Replica
from tests.waiting import eventually

SERVER = """
import socket, sys, time
time.sleep(float(sys.argv[2]))
server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
while True:
    connection, _ = server.accept()
    with connection:
        connection.recv(65536)
        connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n")
"""


class Events:
    """What the fleet told the router, and a switch for what the router has in flight."""

    def __init__(self) -> None:
        self.ready: list[str] = []
        self.retired: list[str] = []
        self.busy = asyncio.Event()
        self.busy.set()

    async def idle(self, name: str) -> None:
        await self.busy.wait()


def template(tmp_path: Path, delay: float) -> str:
    script = tmp_path / "engine.py"
    script.write_text(SERVER, encoding="utf-8")
    return f"{sys.executable} {script} {{port}} {delay}"


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as made:
        yield made


def fleet_of(
    tmp_path: Path, session: aiohttp.ClientSession, events: Events, *, delay: float = 0.3, slots: int = 3
) -> EngineFleet:
    return EngineFleet(
        template(tmp_path, delay),
        PlacementPool(placements([], slots)),
        ScaledClock(),
        session,
        tmp_path / "logs",
        idle=events.idle,
        on_ready=lambda r: events.ready.append(r.name),
        on_retire=lambda r: events.retired.append(r.name),
        grace=30.0,
        ready_within=30.0,
    )


@contextlib.asynccontextmanager
async def closing(fleet: EngineFleet) -> AsyncIterator[EngineFleet]:
    """`fleet`, closed at the end of the block, with none of its processes left."""
    try:
        yield fleet
    finally:
        await fleet.close()
    assert not any(alive(r) for r in fleet.every)


def alive(replica: Replica) -> bool:
    engine = replica.engine
    if engine is None or engine.process is None:
        return False
    try:
        os.killpg(engine.process.pid, 0)
    except ProcessLookupError:
        return False
    return True


async def until(condition: Callable[[], bool]) -> None:
    await eventually(lambda: _now(condition), within=20.0, what="the fleet's state", interval=0.02)


async def _now(condition: Callable[[], bool]) -> bool:
    return condition()


async def test_a_scaled_up_replica_counts_at_once_and_is_ready_once_healthy(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    events = Events()
    async with closing(fleet_of(tmp_path, session, events)) as fleet:
        await fleet.start(1)
        assert events.ready == ["r1"] and fleet.scale() == Scale(1, 1, 1)
        await fleet.scale_to(2)
        assert fleet.scale() == Scale(2, 2, 1)  # loading: exists, not Ready
        await until(lambda: fleet.scale() == Scale(2, 2, 2))
        record = fleet.every[1].record
        assert not record.initial and record.to_healthy is not None and record.to_healthy >= 0.3
        assert record.to_ready is not None and record.to_ready >= record.to_healthy
        assert events.ready == ["r1", "r2"]


async def test_scale_down_takes_a_loading_replica_first_then_the_newest_and_drains_it(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    events = Events()
    async with closing(fleet_of(tmp_path, session, events, delay=0.3)) as fleet:
        await fleet.start(2)
        fleet.template = template(tmp_path, 60.0)  # the next replica would load for a minute
        await fleet.scale_to(3)
        await until(lambda: fleet.every[2].phase is Phase.LOADING)
        await fleet.scale_to(2)
        assert [r.name for r in fleet.replicas] == ["r1", "r2"]
        await until(lambda: fleet.every[2].phase is Phase.STOPPED)
        assert fleet.every[2].record.healthy is None and not alive(fleet.every[2])

        events.busy.clear()  # the router still has requests on whatever drains now
        await fleet.scale_to(1)
        assert fleet.scale() == Scale(1, 1, 1) and events.retired == ["r2"]
        await asyncio.sleep(0.3)
        draining = fleet.every[1]
        assert draining.phase is Phase.DRAINING and alive(draining)
        events.busy.set()
        await until(lambda: draining.phase is Phase.STOPPED)
        assert not alive(draining) and draining.record.stopped is not None


async def test_a_replica_waits_for_a_free_gpu_like_a_pending_pod(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    events = Events()
    async with closing(fleet_of(tmp_path, session, events, slots=1)) as fleet:
        await fleet.start(1)
        events.busy.clear()
        await fleet.scale_to(0)
        await fleet.scale_to(1)  # the only GPU is held by the draining replica
        await asyncio.sleep(0.3)
        assert fleet.every[1].phase is Phase.PENDING and fleet.scale() == Scale(1, 1, 0)
        events.busy.set()
        await until(lambda: fleet.scale() == Scale(1, 1, 1))
        first, second = (r.record for r in fleet.every)
        assert first.stopped is not None and second.spawned is not None and second.spawned >= first.stopped


async def test_an_engine_that_will_not_start_ends_the_start_with_its_log(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    events = Events()
    async with closing(fleet_of(tmp_path, session, events)) as fleet:
        fleet.template = (
            f"{sys.executable} -c \"import sys; print('CUDA out of memory'); sys.exit(1)\" {{port}}"
        )
        with pytest.raises(EngineFailure, match="exited with code 1") as raised:
            await fleet.start(1)
        assert "CUDA out of memory" in raised.value.log_tail


async def test_close_ends_every_process_loading_or_serving(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    events = Events()
    fleet = fleet_of(tmp_path, session, events)
    await fleet.start(1)
    fleet.template = template(tmp_path, 60.0)
    await fleet.scale_to(3)
    await until(lambda: all(r.phase is Phase.LOADING for r in fleet.every[1:]))
    events.busy.clear()  # a drain would wait: closing does not
    await fleet.close()
    assert all(r.phase is Phase.STOPPED and not alive(r) for r in fleet.every)
    assert fleet.held_seconds(end=fleet.clock.now()) > 0
