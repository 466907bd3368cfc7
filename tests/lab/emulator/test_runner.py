"""The real-time driver: a scaled clock and an engine kept up with it on the asyncio loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from lab import virtual_time
from lab.clock import ScaledClock
from lab.emulator.engine import Engine
from lab.emulator.params import EngineParams
from lab.emulator.request import Request
from lab.emulator.runner import EngineRunner, EngineStopped
from tests.waiting import until

PARAMS = EngineParams(step_jitter=0.0, eos_probability=0.0)


def test_scaled_clock_runs_time_scale_times_faster() -> None:
    """Emulated time advances `time_scale` seconds per real second; real() converts back."""
    clock = ScaledClock(50.0)
    start_emulated, start_real = clock.now(), time.monotonic()
    time.sleep(0.05)
    ratio = (clock.now() - start_emulated) / (time.monotonic() - start_real)
    assert ratio == pytest.approx(50.0, rel=0.05)
    assert clock.real(10.0) == pytest.approx(0.2)


@pytest.mark.parametrize("scale", [0.0, -1.0])
def test_scaled_clock_refuses_a_non_positive_scale(scale: float) -> None:
    """Time cannot stand still or run backwards."""
    with pytest.raises(ValueError, match=r"time_scale -?[0-9.]+ must be > 0"):
        ScaledClock(scale)


async def _runner(scale: float) -> EngineRunner:
    clock = ScaledClock(scale)
    runner = EngineRunner(Engine(PARAMS, start=clock.now()), clock)
    runner.start()
    return runner


async def test_complete_returns_when_the_emulated_generation_ends() -> None:
    """A request resolves once its tokens are generated; at 100x, 0.5 emulated seconds take ~5 ms."""
    runner = await _runner(100.0)
    try:
        started = time.monotonic()
        request = await runner.complete(500, 200)
        elapsed = time.monotonic() - started
        assert request.finish_reason == "length" and request.num_output == 200
        assert request.e2e == pytest.approx(
            PARAMS.frontend_seconds + PARAMS.step_seconds(1, 500) + 199 * PARAMS.step_seconds(1, 1), rel=0.05
        )
        assert elapsed < 2.0
        assert runner.inflight == 0 and runner.lag == 0.0
    finally:
        await runner.stop()


async def test_real_time_is_kept_at_scale_one() -> None:
    """At scale 1 a request lasting ~0.1 emulated seconds takes ~0.1 real seconds."""
    runner = await _runner(1.0)
    try:
        started = time.monotonic()
        request = await runner.complete(100, 60)
        elapsed = time.monotonic() - started
        assert request.e2e is not None
        assert elapsed == pytest.approx(request.e2e, abs=0.05)
    finally:
        await runner.stop()


async def test_cancelling_the_wait_aborts_the_request() -> None:
    """A caller that gives up (client gone) aborts its request: it leaves the engine as `abort`."""
    runner = await _runner(1.0)
    try:
        task = asyncio.create_task(runner.complete(100, 4000 - 100))
        await until(lambda: runner.inflight == 1, what="the request in flight")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert runner.engine.stats.request_success["abort"] == 1
        assert runner.engine.idle and runner.inflight == 0
    finally:
        await runner.stop()


async def test_stop_aborts_in_flight_requests_and_refuses_new_ones() -> None:
    """Stopping resolves every waiter with finish_reason abort, then refuses further requests."""
    runner = await _runner(1.0)
    tasks = [asyncio.create_task(runner.complete(100, 3000)) for _ in range(3)]
    await until(lambda: runner.inflight == 3, what="three requests in flight")
    await runner.stop()
    results = await asyncio.gather(*tasks)
    assert {r.finish_reason for r in results} == {"abort"}
    with pytest.raises(EngineStopped, match="unable to accept request"):
        await runner.complete(10, 1)


async def test_drained_waits_for_in_flight_requests() -> None:
    """drained() returns once nothing is in flight."""
    runner = await _runner(20.0)
    try:
        task = asyncio.create_task(runner.complete(100, 300))
        await asyncio.sleep(0)
        assert runner.inflight == 1
        async with asyncio.timeout(5):
            await runner.drained()
        assert runner.inflight == 0
        assert (await asyncio.wait_for(task, 1)).finish_reason == "length"
    finally:
        await runner.stop()


def test_the_runner_sleeps_until_the_engines_next_event_not_every_tick() -> None:
    """A request of 400 decode steps (~10 emulated seconds) wakes the runner a handful of times: at
    the prefill, at the end of the decode run and at the finishing step, not every few milliseconds."""

    async def main() -> tuple[Request, int]:
        clock = ScaledClock(10.0, monotonic=asyncio.get_running_loop().time)
        engine = Engine(EngineParams(step_jitter=0.1, eos_probability=0.0), start=clock.now())
        runs = 0
        run_until = engine.run_until

        def counted(until: float, max_steps: int | None = None) -> None:
            nonlocal runs
            runs += 1
            run_until(until, max_steps)

        engine.run_until = counted  # type: ignore[method-assign]
        runner = EngineRunner(engine, clock)
        runner.start()
        try:
            request = await runner.complete(100, 400)
            await asyncio.sleep(clock.real(1.0))
        finally:
            await runner.stop()
        return request, runs

    request, runs = virtual_time.run(main())
    assert request.num_output == 400 and request.finish_reason == "length"
    assert runs <= 6, runs
