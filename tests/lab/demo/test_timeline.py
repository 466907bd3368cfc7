"""The demo's timeline (`lab.demo.timeline`): a periodic round happens at its scheduled time.

The clock here is injected: every wait overshoots its target by a few milliseconds, as an event loop's
timers do, without any real waiting.
"""

from __future__ import annotations

import asyncio

import pytest

from lab.clock import ScaledClock
from lab.demo.timeline import Timeline


class LateClock(ScaledClock):
    """Emulated time that moves only when waited on, and then lands `late` seconds past the target."""

    def __init__(self, late: float) -> None:
        super().__init__(1.0)
        self.t = 0.0
        self.late = late

    def now(self) -> float:
        return self.t

    def real(self, emulated_seconds: float) -> float:
        self.t += max(emulated_seconds, 0.0) + self.late
        return 0.0


async def test_a_round_sees_its_scheduled_time_and_tasks_it_starts_see_the_clock() -> None:
    """Inside a round `now()` is the round's time (0, 15, 30), whatever the lateness, so an HPA sync at 225 s
    finds its recommendation of 165 s exactly one 60 s window back in every run; a task started by the round
    runs on after it and reads the clock. Outside any round `now()` is the clock."""
    clock = LateClock(late=0.013)
    timeline = Timeline(clock)
    timeline.begin()
    seen: list[tuple[float, float]] = []
    children: list[asyncio.Task[float]] = []
    third = asyncio.Event()

    async def child() -> float:
        return timeline.now()

    async def round_() -> None:
        seen.append((timeline.now(), clock.now()))
        children.append(asyncio.create_task(child()))
        await asyncio.sleep(0)  # a round that awaits (the HPA reads the adapter) keeps its time
        assert timeline.now() == seen[-1][0]
        if len(seen) == 3:
            third.set()

    loop = asyncio.create_task(timeline.every(15.0, round_))
    await asyncio.wait_for(third.wait(), timeout=5)
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
    assert [scheduled for scheduled, _ in seen[:3]] == [0.0, 15.0, 30.0]  # more may run before the cancel
    assert [round(real, 3) for _, real in seen[:3]] == [0.013, 15.013, 30.013]
    assert (await asyncio.gather(*children))[:3] == pytest.approx([0.013, 15.013, 30.013])
    assert timeline.now() == clock.now()


async def test_rounds_of_two_timelines_do_not_mix() -> None:
    """A round of one timeline leaves another timeline's `now()` on its clock."""
    first, second = LateClock(0.0), LateClock(0.0)
    second.t = 100.0
    mine, other = Timeline(first), Timeline(second)
    seen: list[float] = []
    done = asyncio.Event()

    async def round_() -> None:
        seen.append(other.now())
        done.set()
        await asyncio.sleep(0)

    loop = asyncio.create_task(mine.every(15.0, round_))
    await asyncio.wait_for(done.wait(), timeout=5)
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
    assert seen[0] == 100.0


async def test_rounds_due_together_run_in_the_order_given() -> None:
    """The HPA (every 15 s) and the observer (every 5 s) in one `rounds`: at 0, 15 and 30 the observer
    records the sync of that time, even though the sync awaits (it reads the adapter over HTTP)."""
    timeline = Timeline(LateClock(late=0.004))
    synced: list[float] = []
    seen: list[tuple[float, float | None]] = []
    done = asyncio.Event()

    async def sync() -> None:
        await asyncio.sleep(0)
        synced.append(timeline.now())

    async def observe() -> None:
        seen.append((timeline.now(), synced[-1] if synced else None))
        if len(seen) == 7:
            done.set()

    loop = asyncio.create_task(timeline.rounds((15.0, sync), (5.0, observe)))
    await asyncio.wait_for(done.wait(), timeout=5)
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
    assert seen[:7] == [
        (0.0, 0.0),
        (5.0, 0.0),
        (10.0, 0.0),
        (15.0, 15.0),
        (20.0, 15.0),
        (25.0, 15.0),
        (30.0, 30.0),
    ]
