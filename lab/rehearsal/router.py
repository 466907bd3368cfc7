"""The router in front of the replicas: each request to the Ready replica with the fewest in flight.

A Kubernetes Service spreads connections at random; the gateways that serve LLMs (the Gateway API
inference extension, vLLM's production-stack router) pick the replica with the least requests in
flight, which is what a fleet of unequal batches needs. Only Ready replicas are candidates; a
draining one keeps the requests it has until they finish. A request refused before its first token
(the replica went away between the choice and the connection) is sent again to another replica, as
a client retries a reset connection; once tokens flowed, a broken stream is that request's failure.

Latencies are the client's, on the run's clock (`ScaledClock`: emulated seconds), through the
profile's streaming client (`lab.profile.client`), so TTFT includes the router's choice and the
connection, as a user's would.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

import aiohttp

from lab.emulator.runner import ScaledClock
from lab.profile.client import CompletionClient, RequestResult

# Times a request refused before any token is sent again elsewhere.
RETRIES: Final = 2


@dataclass
class _Target:
    client: CompletionClient
    inflight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while nothing is in flight on it."""

    def __post_init__(self) -> None:
        self.idle.set()

    def begin(self) -> None:
        self.inflight += 1
        self.idle.clear()

    def end(self) -> None:
        self.inflight -= 1
        if self.inflight == 0:
            self.idle.set()


class NoReadyReplica(Exception):
    """No replica is Ready to take the request."""


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
        for _ in range(RETRIES + 1):
            name = self.choose()
            target = self._ready[name]
            target.begin()
            try:
                result = await target.client.complete(prompt, max_tokens, self._first_token(name))
            finally:
                target.end()
            if result.error is None or result.ttft is not None or not self._ready:
                break
        # The client's clock started at this attempt's send; the user's started at the first.
        return _since(result, sent)

    def _first_token(self, name: str) -> Callable[[float], None]:
        return lambda _ttft: self.on_first_token(name)


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
