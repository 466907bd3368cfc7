"""The rehearsal's clients: the load's requests sent at their times through the router, each outcome
written to the demo's request log (`lab.demo.request_log`), so the ticks, the CSV and the summary read
them exactly as the demo's.

What was sent (when, how long an output) is kept too: it is the trace the backtest replays.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import NamedTuple

from lab.demo.request_log import RequestLog
from lab.demo.timeline import Timeline
from lab.engine.readiness import NoReadyReplica
from lab.records import RequestFate, RequestRecord
from lab.rehearsal.load import Send
from lab.rehearsal.router import Router


class Sent(NamedTuple):
    """One request as sent: seconds into the run, prompt and output tokens."""

    at: float
    prompt_tokens: int
    output_tokens: int


class Clients:
    """Plays `sends` against `router`, writing every outcome to `log`."""

    def __init__(self, router: Router, timeline: Timeline, log: RequestLog) -> None:
        self.router = router
        self.timeline = timeline
        self.log = log
        self.sent: list[Sent] = []
        """Every request sent: the trace the backtest replays."""
        self._inflight: set[asyncio.Task[None]] = set()
        self.unfinished = 0
        """Requests in flight when the run was stopped (`stop`): neither completed nor failed."""
        self._stopping = False

    async def play(self, sends: Iterable[Send], until: float) -> None:
        """Send each request at its time; return at `until` (seconds into the run)."""
        for send in sends:
            await self.timeline.sleep_until(send.at)
            task = asyncio.create_task(self.send(send))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)
        await self.timeline.sleep_until(until)

    async def drain(self, grace: float) -> None:
        """Give the requests still in flight `grace` seconds (emulated) to finish."""
        if self._inflight:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.timeline.clock.real(grace)):
                    await asyncio.gather(*self._inflight, return_exceptions=True)

    async def cancel(self) -> None:
        """Abort the requests still in flight (each is recorded as aborted)."""
        for task in self._inflight:
            task.cancel()
        await asyncio.gather(*self._inflight, return_exceptions=True)

    async def stop(self) -> int:
        """The run was stopped (a signal, not the fleet): end the requests in flight, each counted as
        unfinished rather than failed, since the stop cut it, not the policy under test; how many."""
        self._stopping = True
        await self.cancel()
        return self.unfinished

    async def send(self, send: Send) -> None:
        """One request through the router; its outcome in the log."""
        self.log.sent()
        sent = self.timeline.now()
        self.sent.append(Sent(sent, len(send.prompt), send.output_tokens))
        try:
            result = await self.router.complete(send.prompt, send.output_tokens)
        except NoReadyReplica:
            self.log.record(RequestRecord(sent, "rejected"), at=self.timeline.now())
            return
        except asyncio.CancelledError:
            if self._stopping:
                self.unfinished += 1
            else:
                self.log.record(RequestRecord(sent, "aborted"), at=self.timeline.now())
            raise
        if result.error is not None:
            # Refused before any token (no replica, a 503): rejected; cut off after some: aborted.
            fate: RequestFate = "rejected" if result.ttft is None else "aborted"
            self.log.record(RequestRecord(sent, fate), at=self.timeline.now())
            return
        self.log.record(RequestRecord(sent, "ok", result.ttft, result.tpot), at=self.timeline.now())
