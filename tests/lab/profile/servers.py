"""Servers for the profile's tests: an emulated vLLM on a loopback port, run by its own event loop in
a thread, so a test can drive it with the synchronous `vllm-autoscale profile` entry point."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

from lab.clock import ScaledClock
from lab.emulator.params import EngineParams
from lab.emulator.replica import EmulatedReplica


@contextlib.contextmanager
def emulated(params: EngineParams, *, model: str = "m", time_scale: float = 1.0) -> Iterator[str]:
    """An emulated replica on a free port; yields its URL once it listens, stops it on exit."""
    ready = threading.Event()
    found: dict[str, object] = {}

    async def serve() -> None:
        stop = asyncio.Event()
        replica = EmulatedReplica(model=model, params=params, clock=ScaledClock(time_scale))
        await replica.start()
        await replica.wait_ready()
        found["url"], found["loop"], found["stop"] = replica.url, asyncio.get_running_loop(), stop
        ready.set()
        await stop.wait()
        await replica.stop()

    def run() -> None:
        try:
            asyncio.run(serve())
        except BaseException as error:  # surfaced to the test below
            found["error"] = error
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not ready.wait(10) or "error" in found:
        raise AssertionError(f"the emulated server did not start: {found.get('error')!r}")
    try:
        yield str(found["url"])
    finally:
        loop, stop = found["loop"], found["stop"]
        assert isinstance(loop, asyncio.AbstractEventLoop) and isinstance(stop, asyncio.Event)
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
