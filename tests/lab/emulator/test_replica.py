"""One emulated server on a real loopback socket: cold start, direct requests, stop and drain."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from lab.clock import ScaledClock
from lab.emulator.params import EngineParams
from lab.emulator.replica import EmulatedReplica, ReplicaNotReady
from tests.waiting import until

PARAMS = EngineParams(eos_probability=0.0)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as client:
        yield client


async def _health(session: aiohttp.ClientSession, replica: EmulatedReplica) -> int | str:
    try:
        async with session.get(f"{replica.url}/health") as response:
            assert await response.read() == b""
            return response.status
    except aiohttp.ClientConnectorError as error:
        return "refused" if isinstance(error.os_error, ConnectionRefusedError) else repr(error)


async def test_port_refuses_connections_while_loading_then_health_is_200(
    session: aiohttp.ClientSession,
) -> None:
    """Like vLLM the port is bound at start but not listening until the load delay (30 emulated
    seconds at 100x: 0.3 s real) has passed; then /health answers 200."""
    replica = EmulatedReplica(params=PARAMS, load_delay=30.0, clock=ScaledClock(100.0))
    await replica.start()
    try:
        started = time.monotonic()
        assert replica.port > 0 and replica.metrics_url == f"http://127.0.0.1:{replica.port}/metrics"
        assert not replica.ready
        assert await _health(session, replica) == "refused"
        async with asyncio.timeout(5):
            await replica.wait_ready()
        assert time.monotonic() - started >= 0.25
        assert replica.ready
        assert await _health(session, replica) == 200
    finally:
        await replica.stop()
    assert await _health(session, replica) == "refused"


async def test_direct_requests_need_a_ready_replica() -> None:
    """complete() refuses while loading (a Service would not route there), then serves."""
    replica = EmulatedReplica(params=PARAMS, load_delay=10.0, clock=ScaledClock(100.0))
    await replica.start()
    try:
        with pytest.raises(ReplicaNotReady, match="is not ready"):
            await replica.complete(100, 10)
        await replica.wait_ready()
        request = await replica.complete(100, 10)
        assert (request.finish_reason, request.num_output) == ("length", 10)
    finally:
        await replica.stop()


async def test_direct_and_http_requests_share_one_engine(session: aiohttp.ClientSession) -> None:
    """Requests submitted in Python and over HTTP are counted by the same /metrics."""
    replica = EmulatedReplica(model="m", params=PARAMS, clock=ScaledClock(100.0))
    await replica.start()
    try:
        await replica.wait_ready()
        await replica.complete([1, 2, 3], 5)
        async with session.post(
            f"{replica.url}/v1/completions", json={"prompt": [1, 2, 3], "max_tokens": 5}
        ) as response:
            assert response.status == 200
        async with session.get(replica.metrics_url) as response:
            text = await response.text()
        assert 'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 2.0' in text
    finally:
        await replica.stop()


@pytest.mark.parametrize(
    ("drain_timeout", "reason"),
    [
        pytest.param(0.0, "abort", id="no drain aborts"),
        pytest.param(60.0, "length", id="drain lets it finish"),
    ],
)
async def test_stop_aborts_or_drains_in_flight_requests(drain_timeout: float, reason: str) -> None:
    """stop() stops listening at once; in-flight work finishes within the drain timeout or is aborted."""
    replica = EmulatedReplica(params=PARAMS, clock=ScaledClock(1.0))
    await replica.start()
    await replica.wait_ready()
    task = asyncio.create_task(replica.complete(100, 100))
    await until(lambda: replica.inflight == 1, what="the request in flight")
    await replica.stop(drain_timeout=drain_timeout)
    assert (await task).finish_reason == reason
    await replica.stop()


async def test_a_taken_port_is_reported() -> None:
    """Binding a port in use fails at start with the address in the message."""
    first = EmulatedReplica(params=PARAMS)
    await first.start()
    try:
        second = EmulatedReplica(params=PARAMS, port=first.port)
        with pytest.raises(OSError, match=f"unable to bind 127.0.0.1:{first.port}"):
            await second.start()
    finally:
        await first.stop()
