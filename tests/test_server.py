"""`adapter.server.serve`: what the serving process does once it listens."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc

from adapter import server
from adapter.config import load
from tests.fakes import FakeSource


async def test_the_start_up_heap_is_frozen_once_serving() -> None:
    """Once the adapter listens, the objects start-up made are out of the collector's reach
    (`gc.freeze`), so no full collection walks them again in a request's way."""
    config = load(None, {"server.port": 1, "server.insecure_serving": True})
    config = dataclasses.replace(config, server=dataclasses.replace(config.server, port=0))  # a free port
    gc.unfreeze()
    made_at_start_up = [object() for _ in range(3)] + [{"kept": n} for n in range(1000)]
    stop = asyncio.Event()
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        server.serve_config(config, stop, source=FakeSource(), on_bound=bound.set_result)
    )
    try:
        await asyncio.wait_for(bound, 10)
        frozen = gc.get_freeze_count()
        tracked = {id(obj) for obj in gc.get_objects()}
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await task
        gc.unfreeze()
    assert frozen >= len(made_at_start_up)
    assert not any(id(obj) in tracked for obj in made_at_start_up[3:])  # frozen objects are not listed
