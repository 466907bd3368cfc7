"""The closed-loop sweep (`lab.profile.sweep`): the lifetime each level is sized by."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace

import pytest

from lab.profile.schema import Step
from lab.profile.sweep import sweep
from tests.lab.profile.builders import SLO, step

SLOTS, LIFETIME = 32, 11.0


class Slots:
    """A closed loop on an engine of `SLOTS` slots whose requests live `LIFETIME` seconds each: the
    throughput grows with the clients up to the slots, then a queue stands. It keeps the lifetime
    each level was sized by."""

    def __init__(self) -> None:
        self.settings = SimpleNamespace(slo=SLO)
        self.steps: list[Step] = []
        self.sized: dict[int, float] = {}

    def throughput(self, level: Step) -> float:
        return level.achieved_rate

    async def step(self, kind: str, clients: float, e2e: float, steps_left: int) -> Step:
        assert kind == "concurrency"
        self.sized[round(clients)] = e2e
        running = min(clients, SLOTS)
        rate = running / LIFETIME
        level = replace(step(rate, kind="concurrency", running=running, waiting=clients - running),
                        e2e_seconds={"p50": clients / rate})  # fmt: skip
        self.steps.append(level)
        return level


def test_levels_below_saturation_are_sized_by_the_lifetime_they_will_see() -> None:
    """The throughput doubled with the clients, so each next level is sized at the lifetime the last
    one measured, not at twice it (as though the throughput had stopped growing); only the first
    doubling, with no growth seen yet, is sized conservatively. Past the first standing queue a level
    is sized by the running requests' lifetime."""
    bench = Slots()
    saturated, _interval = asyncio.run(sweep(bench, LIFETIME))  # type: ignore[arg-type]
    assert saturated == pytest.approx(SLOTS / LIFETIME)
    assert bench.sized[1] == LIFETIME and bench.sized[2] == pytest.approx(2 * LIFETIME)
    for clients in (4, 8, 16, 32):
        assert bench.sized[clients] == pytest.approx(LIFETIME), clients
    assert bench.sized[128] == pytest.approx(LIFETIME)  # 32 running over 32/11 a second
