"""`StreamIsActive`: the current activity at once, then every change, at most once per refresh interval."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable


async def changes(
    read: Callable[[], Awaitable[bool]], interval: float, closing: asyncio.Event
) -> AsyncIterator[bool]:
    """Yield `read()` at once, then each new value that differs from the last one yielded.

    `read` is called every `interval` seconds (the cache refreshes a key no faster, so reading more
    often could not see more changes); consecutive yields are therefore at least `interval` apart.
    The iteration ends, without error, when `closing` is set (server shutdown). An exception from
    `read` ends it too, and propagates: a stream must not carry a guess.
    """
    last: bool | None = None
    while not closing.is_set():
        state = await read()
        if state != last:
            last = state
            yield state
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(closing.wait(), interval)
