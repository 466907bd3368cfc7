"""StreamIsActive's timing: the state at once, then only changes, at most once per interval, until closed."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from adapter.errors import StaleSample
from adapter.keda.activity import changes

INTERVAL = 0.05
# Generous for a loaded CI machine; every wait below returns as soon as its condition holds.
DEADLINE = 10.0


async def test_first_state_at_once_then_only_changes() -> None:
    """The first read is yielded without waiting; equal reads are not repeated; each change is."""
    states = iter([False, False, False, True, True, False])
    reads = 0
    closing = asyncio.Event()

    async def read() -> bool:
        nonlocal reads
        reads += 1
        try:
            return next(states)
        except StopIteration:
            closing.set()
            return False

    started = time.monotonic()
    stream = changes(read, INTERVAL, closing)
    assert await anext(stream) is False
    assert time.monotonic() - started < INTERVAL, "the current state is sent at once"
    seen = [state async for state in stream]
    assert seen == [True, False]
    assert reads == 7


async def test_changes_are_no_more_frequent_than_the_interval() -> None:
    """A state flipping on every read is still sent at most once per interval."""
    flip = False

    async def read() -> bool:
        nonlocal flip
        flip = not flip
        return flip

    closing = asyncio.Event()
    sent: list[float] = []
    async with asyncio.timeout(DEADLINE):
        async for _ in changes(read, INTERVAL, closing):
            sent.append(time.monotonic())
            if len(sent) == 5:
                closing.set()
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert len(gaps) == 4
    assert min(gaps) >= INTERVAL * 0.95, gaps


async def test_closing_ends_the_stream_at_once_and_cleanly() -> None:
    """Setting `closing` ends the iteration without waiting out the interval and without an error."""
    closing = asyncio.Event()

    async def read() -> bool:
        return True

    stream = changes(read, 60.0, closing)
    assert await anext(stream) is True
    waiting = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    closing.set()
    async with asyncio.timeout(DEADLINE):
        with pytest.raises(StopAsyncIteration):
            await waiting


async def test_an_error_ends_the_stream_with_that_error() -> None:
    """A failed read is not turned into a state: it propagates and ends the stream."""
    answers: list[bool | Exception] = [True, StaleSample("old")]

    async def read() -> bool:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    stream = changes(read, INTERVAL, asyncio.Event())
    assert await anext(stream) is True
    with pytest.raises(StaleSample):
        async with asyncio.timeout(DEADLINE):
            await anext(stream)
