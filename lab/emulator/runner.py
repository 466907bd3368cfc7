"""Running an engine in (scaled) real time on the asyncio loop.

`EngineRunner` keeps an `Engine` caught up with its clock by events, not by polling: it sleeps until
the engine's next event (`Engine.next_event`: the start of its next step, past a run of decode steps
in which no request changes state), or until a request arrives, and then runs the steps that have
started. Between its events the engine is behind the clock; whatever acts on it (a submission, an
abort, a hand-over) or reads it (the `/metrics` page, a stream, the demo's view) first catches it up
(`catch_up`), which cuts a decode run without changing it (the run keeps its step time). Requests get
their arrival time from the clock and an `asyncio.Future` resolved when they finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Sequence
from typing import Final

from lab.clock import ScaledClock
from lab.emulator.engine import Engine
from lab.emulator.request import Request, RequestStatus

log = logging.getLogger(__name__)

# Real seconds a CPU-bound catch-up runs before yielding to the loop, so HTTP stays served.
SLICE_SECONDS: Final = 0.02
# Steps per catch-up slice between looks at the clock.
_STEPS_PER_SLICE: Final = 500
# Emulated seconds the engine may fall behind its clock before we say so (CPU too slow).
_LAG_WARNING_SECONDS: Final = 1.0


class EngineStopped(Exception):
    """The runner has stopped; it takes no more requests (HTTP 503)."""


class EngineRunner:
    """Drives one engine against a clock; the only code that advances a live engine."""

    def __init__(self, engine: Engine, clock: ScaledClock) -> None:
        self.engine = engine
        engine.planned_runs = True
        self.clock = clock
        self._waiter: asyncio.Future[bool] | None = None
        self._drained = asyncio.Event()
        self._drained.set()
        self._futures: dict[int, tuple[Request, asyncio.Future[Request]]] = {}
        self._first_tokens: dict[Request, asyncio.Future[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._warned = 0.0

    @property
    def lag(self) -> float:
        """How far (emulated seconds) the engine is behind its next event; 0 when keeping up."""
        due = self.engine.next_event()
        return 0.0 if due is None else max(0.0, self.clock.now() - due)

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
        self.catch_up()
        for request, _future in list(self._futures.values()):
            self.engine.abort(request)
        self._first_token_check()

    def catch_up(self) -> None:
        """Run the steps that have started by now (the engine waits between its events): call before
        acting on the engine or reading it. A CPU-bound engine is caught up by one slice here; the
        runner does the rest."""
        engine = self.engine
        due = engine.next_event()
        now = self.clock.now()
        if due is not None and due <= now:
            engine.run_until(math.nextafter(now, math.inf), max_steps=_STEPS_PER_SLICE)
            self._first_token_check()

    def wake(self) -> None:
        """Have the runner look at the engine again (something changed its next event)."""
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(False)

    def abort(self, request: Request) -> None:
        """Abort `request` now (its client left): it leaves the engine as `abort`."""
        self.catch_up()
        self.engine.abort(request)
        self._first_token_check()
        self.wake()

    async def first_token(self, request: Request) -> None:
        """Return once `request` has its first token or has finished (aborted before one)."""
        if request.first_token is not None or request.status is RequestStatus.FINISHED:
            return
        future = self._first_tokens.get(request)
        if future is None:
            future = self._first_tokens[request] = asyncio.get_running_loop().create_future()
        await asyncio.shield(future)

    def _first_token_check(self) -> None:
        waiting = self._first_tokens
        if not waiting:
            return
        for request in [
            r for r in waiting if r.first_token is not None or r.status is RequestStatus.FINISHED
        ]:
            future = waiting.pop(request)
            if not future.done():
                future.set_result(None)

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
                self.abort(request)
            raise

    def submit(
        self, prompt: Sequence[int] | int, max_tokens: int | None = None, *, ignore_eos: bool = False
    ) -> tuple[Request, asyncio.Future[Request]]:
        """Submit a request now; the future resolves when it finishes. The caller watches the request
        (a streaming response reads its tokens) and aborts it with `abort` if it gives up.

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

        self.catch_up()
        request = self.engine.submit(
            prompt, max_tokens, ignore_eos=ignore_eos, at=self.clock.now(), on_finish=finished
        )
        self._futures[id(request)] = (request, future)
        self._drained.clear()
        self.wake()
        return request, future

    async def drained(self) -> None:
        """Wait until no request is in flight."""
        await self._drained.wait()

    async def _run(self) -> None:
        engine, clock = self.engine, self.clock
        loop = asyncio.get_running_loop()
        reached = -math.inf  # the event the runner's timer last woke it for (emulated)
        while True:
            due = engine.next_event()
            now = max(clock.now(), reached)
            if due is None or due > now:
                # Sleep until the event, or until a submission, an abort or a hand-over changes it.
                waiter = self._waiter = loop.create_future()
                timer = None if due is None else loop.call_later(clock.real(due - clock.now()), _ring, waiter)
                fired = await waiter
                self._waiter = None
                if timer is not None:
                    timer.cancel()
                reached = due if fired and due is not None else -math.inf
                continue
            # The steps that have started by now (the last may end later), in slices while CPU-bound.
            target = math.nextafter(now, math.inf)
            reached = -math.inf
            started = clock.monotonic()
            engine.run_until(target, max_steps=_STEPS_PER_SLICE)
            while (
                engine.now < target
                and clock.monotonic() - started < SLICE_SECONDS
                and engine.next_event() is not None
            ):
                engine.run_until(target, max_steps=_STEPS_PER_SLICE)
            self._first_token_check()
            behind = target - engine.now
            if behind > 0 and engine.next_event() is not None:
                if behind > _LAG_WARNING_SECONDS and clock.monotonic() - self._warned > 10:
                    self._warned = clock.monotonic()
                    log.warning(
                        "emulated engine is %.1f emulated seconds behind its clock (CPU-bound)", behind
                    )
                await asyncio.sleep(0)


def _ring(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(True)
