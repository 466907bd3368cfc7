"""The virtual-time event loop: timers jump, I/O and threads cost no virtual time, the outside is served."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request

import pytest
from aiohttp import ClientSession, web

from adapter.clock import SYSTEM_CLOCK
from lab import virtual_time
from lab.virtual_time import VIRTUAL_EPOCH, VirtualTimeLoop, loop_clock


def test_an_hour_of_sleep_passes_in_far_less_than_an_hour() -> None:
    async def main() -> float:
        await asyncio.sleep(3600)
        return asyncio.get_running_loop().time()

    started = time.monotonic()
    assert virtual_time.run(main()) == pytest.approx(3600, abs=1e-9)
    # Not a speed test: a loop on the wall clock would take the whole hour.
    assert time.monotonic() - started < 60


def test_timers_fire_in_order_at_their_virtual_times() -> None:
    fired: list[tuple[str, float]] = []

    async def after(name: str, delay: float) -> None:
        await asyncio.sleep(delay)
        fired.append((name, asyncio.get_running_loop().time()))

    async def main() -> None:
        await asyncio.gather(after("five", 5.0), after("one", 1.0), after("three", 3.0))

    virtual_time.run(main())
    assert fired == [("one", 1.0), ("three", 3.0), ("five", 5.0)]


def test_a_timeout_fires_at_its_virtual_deadline() -> None:
    async def main() -> float:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.sleep(10), timeout=2)
        return asyncio.get_running_loop().time()

    assert virtual_time.run(main()) == pytest.approx(2.0)


async def _hello(_: web.Request) -> web.Response:
    return web.Response(text="hello")


async def _serve() -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_get("/", _hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/"


def test_http_over_loopback_costs_no_virtual_time_while_a_timer_waits() -> None:
    """A timer 10 s away must not fire while the client waits for the server in the same loop:
    a jump taken while a request was in flight would make the answer arrive late."""

    async def main() -> tuple[list[str], float]:
        timer = asyncio.create_task(asyncio.sleep(10))
        runner, url = await _serve()
        answers = []
        async with ClientSession() as session:
            for _ in range(20):
                async with session.get(url) as response:
                    answers.append(await response.text())
        elapsed = asyncio.get_running_loop().time()
        await runner.cleanup()
        timer.cancel()
        return answers, elapsed

    answers, elapsed = virtual_time.run(main())
    assert answers == ["hello"] * 20
    assert elapsed == 0.0


def test_a_thread_holds_the_clock_until_it_is_done() -> None:
    async def main() -> float:
        timer = asyncio.create_task(asyncio.sleep(1.0))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, time.sleep, 0.05)
        now = loop.time()
        timer.cancel()
        return now

    assert virtual_time.run(main()) == 0.0


def test_a_client_outside_the_loop_is_served_while_time_jumps() -> None:
    """What a person does with `demo --real-time` off: `curl` the adapter while the run plays."""
    got: list[str] = []
    done = threading.Event()

    def fetch(url: str) -> None:
        with urllib.request.urlopen(url, timeout=10) as response:
            got.append(response.read().decode())
        done.set()

    async def main() -> float:
        runner, url = await _serve()
        threading.Thread(target=fetch, args=(url,), daemon=True).start()
        while not done.is_set():  # noqa: ASYNC110 (the point: timers keep the clock jumping)
            await asyncio.sleep(1.0)  # a run going on: virtual time jumps between its timers
        await runner.cleanup()
        return asyncio.get_running_loop().time()

    assert virtual_time.run(main()) >= 1.0
    assert got == ["hello"]


def test_the_adapter_reads_the_loops_clock() -> None:
    async def main() -> tuple[float, float]:
        await asyncio.sleep(42)
        clock = loop_clock()
        return clock.wall(), clock.monotonic()

    assert virtual_time.run(main()) == (VIRTUAL_EPOCH + 42, 42)
    assert loop_clock() is SYSTEM_CLOCK  # no loop running


def test_a_standard_loop_on_request() -> None:
    async def main() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        return isinstance(loop, VirtualTimeLoop), loop.time() - time.monotonic()

    virtual, offset = virtual_time.run(main(), virtual=False)
    assert not virtual
    assert abs(offset) < 1.0
    assert asyncio.run(_loop_clock_is_system())


async def _loop_clock_is_system() -> bool:
    return loop_clock() is SYSTEM_CLOCK
