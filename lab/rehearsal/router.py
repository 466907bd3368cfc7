"""The router in front of the replicas: each request to the Ready replica with the fewest in flight.

A Kubernetes Service spreads connections at random; the gateways that serve LLMs (the Gateway API
inference extension, vLLM's production-stack router) pick the replica with the least requests in
flight, which is what a fleet of unequal batches needs. Only Ready replicas are candidates; a
draining one keeps the requests it has until they finish. A request refused before its first token
(the replica went away between the choice and the connection) is sent again to another replica, as
a client retries a reset connection; once tokens flowed, a broken stream is that request's failure.

A replica found dead or unresponsive (`fail`, from the fleet's watch) leaves the router at once, and
its requests in flight are cut off there and then, not left to hang on a stopped process: each one
that had no token yet is sent once more to another replica (`counts.retried`), each one that had
tokens is failed (`counts.cut_off`), as a gateway does when an endpoint's connection drops.

Latencies are the client's, on the run's clock (`ScaledClock`: emulated seconds), through the
profile's streaming client (`lab.load.client`), so TTFT includes the router's choice and the
connection, as a user's would.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

import aiohttp

from lab.clock import ScaledClock
from lab.engine.readiness import NoReadyReplica
from lab.load.client import CompletionClient, RequestResult

# Times a request refused before any token is sent again elsewhere.
RETRIES: Final = 2
# Times a request whose replica failed under it, before its first token, is sent again elsewhere.
FAILED_REPLICA_RETRIES: Final = 1


@dataclass
class FaultCounts:
    """What failed replicas did to the requests in flight on them."""

    retried: int = 0
    """Requests re-sent to another replica because theirs failed before their first token (each once)."""
    cut_off: int = 0
    """Requests failed because their replica failed after their first token."""
    lost_retry: int = 0
    """Re-sent requests that found no Ready replica, or whose second replica failed too."""


@dataclass
class _Target:
    client: CompletionClient
    inflight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while nothing is in flight on it."""
    attempts: set[asyncio.Future[RequestResult]] = field(default_factory=set)
    """The requests in flight on it, to cut off if it fails."""
    failed: bool = False

    def __post_init__(self) -> None:
        self.idle.set()

    def begin(self) -> None:
        self.inflight += 1
        self.idle.clear()

    def end(self) -> None:
        self.inflight -= 1
        if self.inflight == 0:
            self.idle.set()


class Router:
    """Least requests in flight over the Ready replicas."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        model: str,
        clock: ScaledClock,
        *,
        on_first_token: Callable[[str], None] = lambda name: None,
    ) -> None:
        self.session = session
        self.model = model
        self.clock = clock
        self.on_first_token = on_first_token
        """Told the replica's name whenever a request's first token arrives from it."""
        self._ready: dict[str, _Target] = {}
        self._draining: dict[str, _Target] = {}
        self._turn = itertools.count()
        self.counts = FaultCounts()

    @property
    def ready(self) -> list[str]:
        return list(self._ready)

    def add(self, name: str, url: str) -> None:
        """Replica `name` at `url` is Ready: it takes requests from now on."""
        self._ready[name] = _Target(CompletionClient(self.session, url, self.model, self.clock))

    def remove(self, name: str) -> None:
        """Replica `name` takes no new requests; those it has run on."""
        target = self._ready.pop(name, None)
        if target is not None:
            self._draining[name] = target

    def fail(self, name: str) -> int:
        """Replica `name` is dead or unresponsive: it leaves the router now and the requests in flight
        on it are cut off (each retried or failed by `complete`); how many were in flight."""
        target = self._ready.pop(name, None) or self._draining.pop(name, None)
        if target is None:
            return 0
        target.failed = True
        for attempt in target.attempts:
            attempt.cancel()
        return len(target.attempts)

    def inflight(self, name: str) -> int:
        """Requests in flight on replica `name` (0 for one the router does not know)."""
        target = self._ready.get(name) or self._draining.get(name)
        return 0 if target is None else target.inflight

    async def idle(self, name: str) -> None:
        """Wait until replica `name` has nothing in flight (at once for one the router does not know)."""
        target = self._ready.get(name) or self._draining.get(name)
        if target is not None:
            await target.idle.wait()

    def choose(self) -> str:
        """The Ready replica with the fewest requests in flight; ties go round in turn."""
        if not self._ready:
            raise NoReadyReplica("no replica is Ready")
        names = list(self._ready)
        start = next(self._turn) % len(names)
        rotated = names[start:] + names[:start]
        return min(rotated, key=lambda name: self._ready[name].inflight)

    async def complete(self, prompt: list[int], max_tokens: int) -> RequestResult:
        """Send one streaming request to the chosen replica; `NoReadyReplica` when there is none.
        A failed request comes back with its `error` set (see `CompletionClient.complete`)."""
        sent = self.clock.now()
        result = RequestResult(sent, error="never sent")
        refused = cut = 0
        while True:
            try:
                name = self.choose()
            except NoReadyReplica:
                if cut:  # re-sent after its replica failed, with nowhere to go: it fails here
                    self.counts.lost_retry += 1
                raise
            if cut:
                self.counts.retried += 1
            result = await self._attempt(name, prompt, max_tokens)
            if result.error is None or result.ttft is not None:
                break
            if result.error == _CUT_OFF:
                cut += 1
                if cut > FAILED_REPLICA_RETRIES:
                    self.counts.lost_retry += 1
                    break
            else:
                refused += 1
                if refused > RETRIES or not self._ready:
                    break
        # The client's clock started at this attempt's send; the user's started at the first.
        return _since(result, sent)

    async def _attempt(self, name: str, prompt: list[int], max_tokens: int) -> RequestResult:
        """One attempt on replica `name`; cut off (its result's error `_CUT_OFF`) if the replica fails."""
        target = self._ready[name]
        began = self.clock.now()
        first: list[float] = []

        def on_first(ttft: float) -> None:
            first.append(ttft)
            self.on_first_token(name)

        attempt = asyncio.ensure_future(target.client.complete(prompt, max_tokens, on_first))
        target.attempts.add(attempt)
        target.begin()
        try:
            result = await attempt
            if result.error is not None and result.error.split(":")[0] in _DROPPED:
                # The connection broke under the request: its replica went away (it died before the
                # watch saw it). The same as a cut-off by `fail`.
                if first:
                    self.counts.cut_off += 1
                return RequestResult(result.sent, ttft=first[0] if first else None, error=_CUT_OFF)
            # An error after tokens flowed (an error in the stream) is that request's failure.
            return replace(result, ttft=first[0]) if result.error is not None and first else result
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not (target.failed and attempt.cancelled()) or (current is not None and current.cancelling()):
                raise
            if first:
                self.counts.cut_off += 1
            return RequestResult(began, ttft=first[0] if first else None, error=_CUT_OFF)
        finally:
            target.attempts.discard(attempt)
            if not attempt.done():
                attempt.cancel()
            target.end()


_CUT_OFF: Final = "cut off: the replica failed with the request in flight"
# aiohttp's words for a connection that broke after it was made (not one refused: that is a refusal).
_DROPPED: Final = frozenset(
    {"ServerDisconnectedError", "ClientPayloadError", "ClientOSError", "ClientConnectionResetError"}
)


def _since(result: RequestResult, sent: float) -> RequestResult:
    """`result` with its TTFT and e2e counted from `sent` (an earlier attempt's send)."""
    shift = result.sent - sent
    if shift == 0:
        return result
    return replace(
        result,
        sent=sent,
        ttft=None if result.ttft is None else result.ttft + shift,
        e2e=None if result.e2e is None else result.e2e + shift,
    )
