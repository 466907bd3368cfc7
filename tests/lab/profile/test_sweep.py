"""The closed-loop sweep (`lab.profile.sweep`): the lifetime each level is sized by, on a model
engine and replayed on the levels a real vLLM 0.26.0 measured."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from lab.profile import plan
from lab.profile.schema import Step, load
from lab.profile.sweep import level_lifetime, sweep
from tests.lab.profile.builders import SLO, step

SLOTS, LIFETIME = 32, 11.0
LONG = Path("runs/2026-11-26-real-vllm-0.26.0-h200/gpu-bound-8b/long-2048/s0/profile.json")


class Slots:
    """A closed loop on an engine of `SLOTS` slots whose requests live `LIFETIME` seconds each: the
    throughput grows with the clients up to the slots, then a queue stands. It keeps the lifetime
    each level was sized by."""

    def __init__(self, slots: int | None, kv_per_request: float = 0.0, output_tokens: float = 2048) -> None:
        workload = SimpleNamespace(output_tokens=SimpleNamespace(mean=output_tokens))
        self.settings = SimpleNamespace(slo=SLO, max_num_seqs=slots, workload=workload)
        self.kv_per_request = kv_per_request
        self.steps: list[Step] = []
        self.sized: dict[int, float] = {}

    def throughput(self, level: Step) -> float:
        return level.achieved_rate

    async def step(self, kind: str, clients: float, e2e: float, steps_left: int) -> Step:
        assert kind == "concurrency"
        self.sized[round(clients)] = e2e
        self.steps.append(self.level(round(clients)))
        return self.steps[-1]

    def level(self, clients: int) -> Step:
        running = min(clients, SLOTS)
        rate = running / LIFETIME
        level = step(
            rate,
            kind="concurrency",
            running=running,
            waiting=clients - running,
            kv=self.kv_per_request * running,
        )
        return replace(level, e2e_seconds={"p50": clients / rate})


@pytest.mark.parametrize("slots", [SLOTS, None], ids=["slots known", "slots unknown"])
def test_levels_are_sized_by_the_lifetime_of_the_requests_they_will_run(slots: int | None) -> None:
    """2,048-token requests. The throughput doubled with the clients, so each next level is sized at the
    lifetime the last one measured, not at twice it (as though the throughput had stopped growing); the first
    doubling too where the slots are known to hold both clients. Past the slots the clients queue, and the
    level is sized by the running requests' lifetime: known slots cap them, and where the slots are unknown
    the clients' count at the last gain gives the same."""
    bench = Slots(slots)
    saturated, _interval = asyncio.run(sweep(bench, LIFETIME))  # type: ignore[arg-type]
    assert saturated == pytest.approx(SLOTS / LIFETIME)
    assert bench.sized[1] == LIFETIME
    assert bench.sized[2] == pytest.approx(LIFETIME if slots else 2 * LIFETIME)
    for clients in (4, 8, 16, 32, 64, 128):
        assert bench.sized[clients] == pytest.approx(LIFETIME), clients


def test_a_level_whose_batch_would_not_fit_the_kv_cache_is_sized_as_if_the_throughput_stopped() -> None:
    """16 clients fill 80 % of the KV cache: 32 would not fit without preemptions, so that level is
    sized at the clients' lifetime had the throughput stopped growing (twice the last), not at the
    last doubling's gain; the levels below it keep theirs."""
    bench = Slots(SLOTS, kv_per_request=0.05)
    asyncio.run(sweep(bench, LIFETIME))  # type: ignore[arg-type]
    for clients in (2, 4, 8, 16):
        assert bench.sized[clients] == pytest.approx(LIFETIME), clients
    assert bench.sized[32] == pytest.approx(2 * LIFETIME)


def test_levels_of_short_requests_keep_the_calibrated_rule() -> None:
    """128-token requests: each level below the first standing queue is sized at the clients'
    lifetime had the throughput stopped growing (twice the last); past it, at the running requests'."""
    bench = Slots(None, output_tokens=128)
    asyncio.run(sweep(bench, LIFETIME))  # type: ignore[arg-type]
    for clients in (2, 4, 8, 16, 32, 64):
        assert bench.sized[clients] == pytest.approx(2 * LIFETIME), clients
    assert bench.sized[128] == pytest.approx(LIFETIME)


class Replay(Slots):
    """The levels of the real run, in order; each costs what `plan.size` gives it now."""

    def __init__(self) -> None:
        super().__init__(32)
        recorded = load(LONG)
        self.recorded = {s.clients: s for s in recorded.steps if s.kind == "concurrency"}
        self.spent = 0.0

    async def step(self, kind: str, clients: float, e2e: float, steps_left: int) -> Step:
        budget = plan.Budget(10_000.0)
        self.spent += plan.size(budget, "concurrency", clients, e2e, steps_left, output_tokens=2048).duration
        self.steps.append(self.recorded[round(clients)])
        return self.steps[-1]


def test_the_real_2048_token_sweep_now_leaves_room_for_a_knee() -> None:
    """Replayed on the levels a real vLLM 0.26.0 measured with 2,048-token requests (8B-shaped, H200,
    4,096 blocks; docs/benchmarks.md), the sweep plans ~350 s where the run spent 473 s (its
    64-client level alone 136 s, sized as if the throughput had stopped growing), so that after the
    warm-up and probe (~55 s) a 10-minute budget keeps ~195 s for the model knee and its open-loop
    check (~160 s at ~1.5 req/s and 13 s lifetimes). The same levels, same saturated throughput."""
    bench = Replay()
    saturated, _interval = asyncio.run(sweep(bench, 9.8))  # type: ignore[arg-type]
    assert list(bench.recorded) == [s.clients for s in bench.steps]
    assert saturated == pytest.approx(1.88, abs=0.03)
    assert bench.spent < 360 and 600 - 55 - bench.spent > 185


def test_a_level_that_finished_no_request_is_known_by_its_running_requests_lifetime() -> None:
    """The clients' median where requests finished; 28 running at 1.4 a second (20 s) where none did."""
    finished = replace(step(1.4, kind="concurrency", running=28.0), e2e_seconds={"p50": 35.0})
    assert level_lifetime(finished) == 35.0
    assert level_lifetime(replace(finished, e2e_seconds={})) == pytest.approx(20.0)
