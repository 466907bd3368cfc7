"""Running an engine in (scaled) real time on the asyncio loop.

`EngineRunner` keeps an `Engine` caught up with it: it runs the steps that are due, then
sleeps a tick, and sleeps until woken while the engine is idle. Requests get their arrival time
from the clock and an `asyncio.Future` resolved when they finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Final

from lab.clock import ScaledClock
from lab.emulator.engine import Engine
from lab.emulator.request import Request

log = logging.getLogger(__name__)

# Real seconds between catch-ups: short enough to add little latency, long enough not to spin.
TICK_SECONDS: Final = 0.005
# Steps per catch-up slice before yielding to the loop, so HTTP stays served while CPU-bound.
_STEPS_PER_SLICE: Final = 500
# Emulated seconds the engine may fall behind its clock before we say so (CPU too slow).
_LAG_WARNING_SECONDS: Final = 1.0


class EngineStopped(Exception):
    """The runner has stopped; it takes no more requests (HTTP 503)."""


class EngineRunner:
    """Drives one engine against a clock; the only code that advances a live engine."""

    def __init__(self, engine: Engine, clock: ScaledClock) -> None:
        self.engine = engine
        self.clock = clock
        self._wake = asyncio.Event()
        self._drained = asyncio.Event()
        self._drained.set()
        self._futures: dict[int, tuple[Request, asyncio.Future[Request]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._warned = 0.0

    @property
    def lag(self) -> float:
        """How far (emulated seconds) the engine is behind its clock; 0 when keeping up."""
        return 0.0 if self.engine.idle else max(0.0, self.clock.now() - self.engine.now)

    @property
    def inflight(self) -> int:
        """Requests submitted and not yet finished."""
        return len(self._futures)

    def start(self) -> None:
        """Start driving the engine (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="emulated-engine")

    async def stop(self) -> None:
        """Stop driving, and abort what is in flight: its waiters get it with `finish_reason == "abort"`."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for request, _future in list(self._futures.values()):
            self.engine.abort(request)

    async def complete(
        self, prompt: Sequence[int] | int, max_tokens: int | None = None, *, ignore_eos: bool = False
    ) -> Request:
        """Submit a request now and wait until it finishes; cancelling the wait aborts it.

        Raises what `Engine.submit` raises (`ValueError`, `AdmissionRejected`) before waiting, and
        `EngineStopped` once `stop()` was called.
        """
        request, future = self.submit(prompt, max_tokens, ignore_eos=ignore_eos)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if id(request) in self._futures:
                self.engine.abort(request)
            raise

    def submit(
        self, prompt: Sequence[int] | int, max_tokens: int | None = None, *, ignore_eos: bool = False
    ) -> tuple[Request, asyncio.Future[Request]]:
        """Submit a request now; the future resolves when it finishes. The caller watches the request
        (a streaming response reads its tokens) and aborts it with `engine.abort` if it gives up.

        Raises as `complete` does, at once.
        """
        if self._closed:
            raise EngineStopped("unable to accept request: the engine has stopped")
        future: asyncio.Future[Request] = asyncio.get_running_loop().create_future()

        def finished(request: Request) -> None:
            self._futures.pop(id(request), None)
            if not self._futures:
                self._drained.set()
            if not future.done():
                future.set_result(request)

        request = self.engine.submit(
            prompt, max_tokens, ignore_eos=ignore_eos, at=self.clock.now(), on_finish=finished
        )
        self._futures[id(request)] = (request, future)
        self._drained.clear()
        self._wake.set()
        return request, future

    async def drained(self) -> None:
        """Wait until no request is in flight."""
        await self._drained.wait()

    async def _run(self) -> None:
        engine = self.engine
        while True:
            if engine.idle:
                self._wake.clear()
                await self._wake.wait()
            target = self.clock.now()
            started = self.clock.monotonic()
            while engine.now < target and self.clock.monotonic() - started < TICK_SECONDS * 4:
                engine.run_until(target, max_steps=_STEPS_PER_SLICE)
                if engine.idle:
                    break
            behind = target - engine.now
            if (
                behind > _LAG_WARNING_SECONDS
                and not engine.idle
                and self.clock.monotonic() - self._warned > 10
            ):
                self._warned = self.clock.monotonic()
                log.warning("emulated engine is %.1f emulated seconds behind its clock (CPU-bound)", behind)
            await asyncio.sleep(0 if behind > 0 and not engine.idle else TICK_SECONDS)
