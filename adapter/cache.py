"""Values served from memory, refreshed in the background per requested key.

A key is (metric, namespace, selector). The first request for a key starts its refresher task and
waits for that task's first fetch; later requests read the latest outcome without touching the
source. Each key has exactly one task, so many identical requests cost one upstream query per
refresh (single flight). A key nobody asked for within `idle_timeout` stops and is dropped.

An outcome is either a `Sample` or the error of the latest fetch: a failed refresh replaces the
previous value, so a source that went down is never hidden behind a value from before it did.

Refreshes happen at wall-clock multiples of the interval (just after each tick), not at "last fetch +
interval": two adapter replicas behind one Service then refresh in the same instants, and with the
sources' own tick alignment (the Prometheus `time` parameter, the scrape rounds) they serve the same
sample, so a client alternating between them never sees time go backwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

from adapter.errors import AdapterError, SourceUnavailable, TooManyKeys
from adapter.sources import Sample

log = logging.getLogger(__name__)

Fetch = Callable[[], Awaitable[Sample]]
Outcome = Sample | AdapterError
Sleep = Callable[[float], Awaitable[None]]

# Wake this fraction of the interval after a tick, so a timer that fires a hair early still lands
# in the new interval (a source flooring the time to the tick then sees the same tick as its peers).
_TICK_OFFSET = 0.01


def until_next_tick(now: float, interval: float) -> float:
    """Seconds from `now` to just after the next wall-clock multiple of `interval`."""
    return (math.floor(now / interval) + 1 + _TICK_OFFSET) * interval - now


@dataclass
class _Entry:
    fetch: Fetch
    first: asyncio.Event = field(default_factory=asyncio.Event)
    outcome: Outcome | None = None
    last_access: float = 0.0
    task: asyncio.Task[None] | None = None


class ValueCache:
    """Per-key background refresh with single flight and idle expiry."""

    def __init__(
        self,
        refresh_interval: float,
        idle_timeout: float,
        *,
        max_keys: int = 1000,
        clock: Callable[[], float] = time.monotonic,
        on_outcome: Callable[[Outcome], None] | None = None,
        wall: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        """`clock` measures idleness; `wall` places the refresh ticks; `sleep` waits for them
        (tests inject both, so no test waits in real time)."""
        self.refresh_interval = refresh_interval
        self._wall = wall
        self._sleep = sleep
        self.idle_timeout = idle_timeout
        self._clock = clock
        self.max_keys = max_keys
        self._entries: dict[Hashable, _Entry] = {}
        self._on_outcome = on_outcome
        self._closed = False

    def __len__(self) -> int:
        return len(self._entries)

    def outcomes(self) -> list[tuple[Hashable, Outcome]]:
        """The latest outcome of every live key that has completed a fetch (a snapshot)."""
        return [(key, e.outcome) for key, e in list(self._entries.items()) if e.outcome is not None]

    async def get(self, key: Hashable, fetch: Fetch) -> tuple[Outcome, bool]:
        """The latest outcome for `key` and whether it was already cached (a hit).

        On a miss, waits for the key's first fetch; that wait is bounded by the source's own timeout.
        """
        if self._closed:
            raise SourceUnavailable("the value cache is shut down")
        entry = self._entries.get(key)
        hit = entry is not None and entry.first.is_set()
        if entry is None:
            if len(self._entries) >= self.max_keys:
                raise TooManyKeys(
                    f"{len(self._entries)} keys are live (max_keys {self.max_keys}); refusing {key!r}"
                )
            entry = _Entry(fetch=fetch)
            self._entries[key] = entry
            entry.task = asyncio.create_task(self._refresh(key, entry), name=f"refresh {key!r}")
        entry.last_access = self._clock()
        await entry.first.wait()
        assert entry.outcome is not None
        return entry.outcome, hit

    async def _refresh(self, key: Hashable, entry: _Entry) -> None:
        try:
            while True:
                entry.outcome = await self._fetch_once(entry.fetch)
                entry.first.set()
                if self._on_outcome is not None:
                    self._on_outcome(entry.outcome)
                await self._sleep(until_next_tick(self._wall(), self.refresh_interval))
                if self._clock() - entry.last_access > self.idle_timeout:
                    log.debug("dropping idle key", extra={"key": repr(key)})
                    return
        finally:
            if self._entries.get(key) is entry:
                del self._entries[key]
            if not entry.first.is_set():
                entry.outcome = SourceUnavailable("the refresher stopped before its first fetch")
                entry.first.set()

    @staticmethod
    async def _fetch_once(fetch: Fetch) -> Outcome:
        try:
            return await fetch()
        except AdapterError as exc:
            return exc
        except Exception as exc:  # a bug in a source must fail closed, never kill the refresher
            log.exception("source raised an unexpected error")
            return SourceUnavailable(f"unexpected {exc.__class__.__name__}: {exc}")

    async def close(self) -> None:
        """Stop every refresher; requests waiting on a first fetch get `SourceUnavailable`."""
        self._closed = True
        tasks = [e.task for e in self._entries.values() if e.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
