"""Values served from memory, refreshed in the background per requested key.

A key is (metric, namespace, selector). The first request for a key starts its first fetch and
waits for it; concurrent requests for the same new key share that fetch (single flight), and later
requests read the latest outcome without touching the source. One refresher refreshes every live
key together on each tick, through `refresh_many` when one is attached (the provider's, which lets a
source answer many keys of a metric in one upstream query), else through each key's own fetch. A key
nobody asked for within `idle_timeout` is dropped.

An outcome is either a `Sample` or the error of the latest fetch: a failed refresh replaces the
previous value, so a source that went down is never hidden behind a value from before it did.

Refreshes happen at wall-clock multiples of the interval (just after each tick), not at "last fetch +
interval": two adapter replicas behind one Service then refresh in the same instants, and with the
sources' own tick alignment (the Prometheus `time` parameter, the scrape rounds) they serve the same
sample, so a client alternating between them never sees time go backwards.

`max_keys` is shared fairly: when it is full, a new key takes the place of a
key that answers "no targets" (the cheapest to lose: it serves nothing, and a request recreates it),
else of the least recently read key of the namespace holding the most keys, while the new key's
namespace holds less than its share; otherwise the new key is refused (429).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from adapter.clock import after_pending_io
from adapter.errors import AdapterError, NoTargets, SourceUnavailable, TooManyKeys
from adapter.sources import Sample

log = logging.getLogger(__name__)

Fetch = Callable[[], Awaitable[Sample]]
Outcome = Sample | AdapterError
Sleep = Callable[[float], Awaitable[None]]
#: outcomes for many keys at once; a key missing from the answer fails closed
RefreshMany = Callable[[Sequence[Hashable]], Awaitable[Mapping[Hashable, Outcome]]]

# Wake this fraction of the interval after a tick, so a timer that fires a hair early still lands
# in the new interval (a source flooring the time to the tick then sees the same tick as its peers).
_TICK_OFFSET = 0.01
# Keys settled between two yields to the event loop after a refresh: about a tenth of a millisecond
# of work, so an answer never waits behind the settling of a whole fleet's keys.
_SETTLE_PER_TURN = 200


def until_next_tick(now: float, interval: float) -> float:
    """Seconds from `now` to just after the next wall-clock multiple of `interval`."""
    return (math.floor(now / interval) + 1 + _TICK_OFFSET) * interval - now


@dataclass
class _Entry:
    fetch: Fetch
    tenant: Hashable
    first: asyncio.Event | None = field(default_factory=asyncio.Event)
    """Set when the first fetch settles, then dropped (`None`): requests wait on it only for a new key,
    and an Event (with its queue of waiters) is about 0.7 KiB, 0.7 MiB in a fleet of a thousand keys."""
    outcome: Outcome | None = None
    last_access: float = 0.0


def _victim(entries: Mapping[Hashable, _Entry], tenant: Hashable, max_keys: int) -> Hashable | None:
    """The key a new key of `tenant` may replace in a full cache, or `None` (refuse the new key).

    First the least recently read key answering "no targets": a flood of selectors for empty
    namespaces churns among itself and never displaces a key that serves something. Else, while
    `tenant` holds less than its share (`max_keys` over the tenants holding keys, the new one
    included), the least recently read key of the tenant holding the most: one namespace's keys
    cannot keep another's out. Keys whose first fetch is still running are never chosen.
    """
    settled = [(key, entry) for key, entry in entries.items() if entry.first is None]
    empty = [(entry.last_access, key) for key, entry in settled if isinstance(entry.outcome, NoTargets)]
    if empty:
        return min(empty, key=lambda item: item[0])[1]
    held: dict[Hashable, int] = {}
    for entry in entries.values():
        held[entry.tenant] = held.get(entry.tenant, 0) + 1
    share = max(1, max_keys // len(held.keys() | {tenant}))
    if held.get(tenant, 0) >= share:
        return None
    largest = max(held, key=lambda t: held[t])
    candidates = [(entry.last_access, key) for key, entry in settled if entry.tenant == largest]
    if held[largest] <= share or not candidates:
        return None
    return min(candidates, key=lambda item: item[0])[1]


class ValueCache:
    """Background refresh of every live key on wall-clock ticks, with single flight, idle expiry and
    fair shares of `max_keys`."""

    def __init__(
        self,
        refresh_interval: float,
        idle_timeout: float,
        *,
        max_keys: int = 1000,
        monotonic: Callable[[], float] = time.monotonic,
        on_outcome: Callable[[Outcome], None] | None = None,
        wall: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        """`monotonic` measures idleness; `wall` places the refresh ticks; `sleep` waits for them
        (tests inject both, so no test waits in real time)."""
        self.refresh_interval = refresh_interval
        self._wall = wall
        self._sleep = sleep
        self.idle_timeout = idle_timeout
        self._monotonic = monotonic
        self.max_keys = max_keys
        self._entries: dict[Hashable, _Entry] = {}
        self._on_outcome = on_outcome
        self._closed = False
        self._refresh_many: RefreshMany | None = None
        self._tenant: Callable[[Hashable], Hashable] = lambda key: None
        self._refresher: asyncio.Task[None] | None = None
        self._first_fetches: set[asyncio.Task[None]] = set()

    def attach(
        self,
        *,
        refresh_many: RefreshMany | None = None,
        tenant: Callable[[Hashable], Hashable] | None = None,
    ) -> None:
        """Set how the owner of the keys refreshes many at once, and which tenant (namespace) a key
        belongs to for fair shares (without one, every key is in one tenant)."""
        self._refresh_many = refresh_many
        if tenant is not None:
            self._tenant = tenant

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
        hit = entry is not None and entry.first is None
        if entry is None:
            entry = self._admit(key, fetch)
        entry.last_access = self._monotonic()
        first = entry.first
        if first is not None:
            await first.wait()
        assert entry.outcome is not None
        return entry.outcome, hit

    def _admit(self, key: Hashable, fetch: Fetch) -> _Entry:
        if len(self._entries) >= self.max_keys:
            evicted = _victim(self._entries, self._tenant(key), self.max_keys)
            if evicted is None:
                raise TooManyKeys(
                    f"{len(self._entries)} keys are live (max_keys {self.max_keys}) and namespace "
                    f"{self._tenant(key)!r} holds its share; refusing {key!r}"
                )
            log.info("evicting a key for a new one", extra={"key": repr(evicted), "new": repr(key)})
            del self._entries[evicted]
        entry = _Entry(fetch=fetch, tenant=self._tenant(key))
        self._entries[key] = entry
        task = asyncio.create_task(self._first_fetch(key, entry), name=f"first fetch {key!r}")
        self._first_fetches.add(task)
        task.add_done_callback(self._first_fetches.discard)
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.create_task(self._refresh_loop(), name="value cache refresher")
        return entry

    async def _first_fetch(self, key: Hashable, entry: _Entry) -> None:
        try:
            self._settle(entry, await _fetch_once(entry.fetch))
        finally:
            if entry.first is not None:  # cancelled by close()
                entry.outcome = SourceUnavailable("the refresher stopped before its first fetch")
                entry.first.set()
                entry.first = None
                if self._entries.get(key) is entry:
                    del self._entries[key]

    def _settle(self, entry: _Entry, outcome: Outcome) -> None:
        entry.outcome = outcome
        if entry.first is not None:
            entry.first.set()
            entry.first = None
        if self._on_outcome is not None:
            self._on_outcome(outcome)

    async def _refresh_loop(self) -> None:
        """Refresh every key whose first fetch is done, just after each tick; end when no key is left."""
        while self._entries:
            await self._sleep(until_next_tick(self._wall(), self.refresh_interval))
            now = self._monotonic()
            for key, entry in list(self._entries.items()):
                if now - entry.last_access > self.idle_timeout:
                    log.debug("dropping idle key", extra={"key": repr(key)})
                    del self._entries[key]
            due = {key: entry for key, entry in self._entries.items() if entry.first is None}
            if not due:
                continue
            outcomes = await self._refresh(list(due))
            settled = list(due.items())
            for start in range(0, len(settled), _SETTLE_PER_TURN):
                if start:
                    await after_pending_io()  # a request arriving meanwhile waits for one part, not all
                for key, entry in settled[start : start + _SETTLE_PER_TURN]:
                    outcome = outcomes.get(key)
                    self._settle(entry, outcome if outcome is not None else SourceUnavailable("no outcome"))

    async def _refresh(self, keys: list[Hashable]) -> Mapping[Hashable, Outcome]:
        if self._refresh_many is None:
            fetched = await asyncio.gather(*(_fetch_once(self._entries[key].fetch) for key in keys))
            return dict(zip(keys, fetched, strict=True))
        try:
            return await self._refresh_many(keys)
        except Exception as exc:  # a bug must fail every key closed, never kill the refresher
            log.exception("refreshing many keys raised an unexpected error")
            failed = SourceUnavailable(f"unexpected {exc.__class__.__name__}: {exc}")
            return dict.fromkeys(keys, failed)

    async def close(self) -> None:
        """Stop refreshing; requests waiting on a first fetch get `SourceUnavailable`."""
        self._closed = True
        tasks = [*self._first_fetches, *([self._refresher] if self._refresher is not None else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _fetch_once(fetch: Fetch) -> Outcome:
    try:
        return await fetch()
    except AdapterError as exc:
        return exc
    except Exception as exc:  # a bug in a source must fail closed, never kill the refresher
        log.exception("source raised an unexpected error")
        return SourceUnavailable(f"unexpected {exc.__class__.__name__}: {exc}")
