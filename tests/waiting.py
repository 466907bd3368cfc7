"""Waiting for something to become true, with a deadline, never a fixed sleep: `eventually` and `until`
on the event loop, `wait_for` in a thread or a synchronous test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    check: Callable[[], Awaitable[T | None]], within: float, what: str, interval: float = 0.2
) -> T:
    """Await `check()` until it returns something truthy; fail naming `what` after `within` seconds of
    the loop's time (virtual on a `lab.virtual_time` loop, else the system's monotonic clock)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last: object = None
    while loop.time() < deadline:
        try:
            result = await check()
            if result:
                return result
            last = result
        except Exception as exc:  # the condition may raise until the service is up
            last = exc
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {within:g}s waiting for {what}: last {last!r}")


async def until(condition: Callable[[], bool], within: float = 5.0, what: str = "the condition") -> None:
    """Yield to the event loop until a synchronous `condition` holds; fail after `within` seconds."""

    async def check() -> bool:
        return condition()

    await eventually(check, within, what, interval=0.001)


def wait_for(predicate: Callable[[], T | None], timeout: float, interval: float = 0.1, what: str = "") -> T:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = predicate()
            if result:
                return result
        except Exception as exc:  # the condition may raise until the service is up
            last_error = exc
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout:g}s waiting for {what or predicate}: last error {last_error!r}"
    )
