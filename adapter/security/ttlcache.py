"""A small in-memory cache whose entries expire, with single-flight loading.

Authentication and authorization ask the kube-apiserver the same question (this token? may this
user get this metric?) every time the HPA polls; the answers are cached for a few seconds so one
poll costs at most one review, and concurrent identical requests share one review.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """Entries live for a per-entry time to live; the oldest are evicted beyond `max_entries`.

    Does not guarantee that an entry survives its TTL (eviction may drop it earlier), and never
    caches an exception raised by a loader.
    """

    def __init__(self, *, max_entries: int = 4096, monotonic: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries {max_entries!r} must be at least 1")
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._loading: dict[K, asyncio.Future[V]] = {}
        self._max_entries = max_entries
        self._monotonic = monotonic

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> tuple[bool, V | None]:
        """`(True, value)` for a live entry, `(False, None)` for a missing or expired one."""
        entry = self._live(key)
        return (False, None) if entry is None else (True, entry[0])

    def put(self, key: K, value: V, ttl: float) -> None:
        """Store `value` for `ttl` seconds; a non-positive TTL stores nothing."""
        if ttl <= 0:
            self._entries.pop(key, None)
            return
        self._entries[key] = (self._monotonic() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    async def get_or_load(self, key: K, load: Callable[[], Awaitable[V]], ttl: Callable[[V], float]) -> V:
        """The cached value, or the result of `load()` stored for `ttl(result)` seconds.

        Concurrent callers with the same key share one `load()`, which runs as its own task so a
        caller that goes away (a client disconnect) does not cancel it for the others. If it raises,
        every caller sees the exception and nothing is cached.
        """
        entry = self._live(key)
        if entry is not None:
            return entry[0]
        task = self._loading.get(key)
        if task is None:
            task = asyncio.ensure_future(load())
            self._loading[key] = task
            task.add_done_callback(lambda done: self._loaded(key, done, ttl))
        return await asyncio.shield(task)

    def _loaded(self, key: K, task: asyncio.Future[V], ttl: Callable[[V], float]) -> None:
        del self._loading[key]
        if not task.cancelled() and task.exception() is None:
            result = task.result()
            self.put(key, result, ttl(result))

    def _live(self, key: K) -> tuple[V] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self._monotonic() >= expires:
            del self._entries[key]
            return None
        return (value,)
