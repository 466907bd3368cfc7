"""`adapter.clock.after_pending_io`: a job of many parts lets a request that arrived go first."""

from __future__ import annotations

import asyncio
import socket

from adapter.clock import after_pending_io


async def test_io_that_arrived_during_a_part_runs_before_the_next_part() -> None:
    """A request that arrives while a part of a long job runs is read, and the step it starts runs,
    before the job's next part (with `asyncio.sleep(0)` the next part ran first)."""
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    order: list[str] = []
    started: list[asyncio.Task[None]] = []

    async def answer() -> None:
        order.append("answer")

    def readable() -> None:
        ours.recv(16)
        order.append("request read")
        started.append(loop.create_task(answer()))

    loop.add_reader(ours, readable)
    try:
        for part in range(3):
            order.append(f"part {part}")
            if part == 0:
                theirs.send(b"GET")  # arrives while part 0 runs
            await after_pending_io()
    finally:
        loop.remove_reader(ours)
        ours.close()
        theirs.close()
    await asyncio.gather(*started)
    assert order[:4] == ["part 0", "request read", "answer", "part 1"]
