"""The scrape loop: every `interval`, discover the targets and fetch every pod's `/metrics` once.

Pods are scraped concurrently, each with its own timeout, so a dead or slow pod costs only itself.
The timeout covers the whole body, which is streamed and read up to `max_body_bytes` only: an
endless, huge or trickling page fails that pod's scrape without being buffered.
Each pod keeps its latest page (gauges) and the window of cumulative series its rates need
(`snapshots.History`). A pod that leaves discovery is dropped with its history. What the pages mean,
and what a failed pod means for a metric, is `adapter.sources.scrape`'s business, not this module's.

Rounds start at multiples of the interval on the wall clock (`wall`), not at intervals from the
adapter's own start, and a round that starts on time is dated at its tick: two adapter replicas
with synchronised clocks scrape the pods at the same instants and serve the same samples. A round
woken early (a new metric or namespace) starts at once. A pod's sample time never decreases while
the clock does not step back.

Rounds are counted three ways so readers can wait for the data they need: *started*, *settled*
(every pod that answered last round has answered or failed: a pod that keeps timing out must not
age everyone's fresh samples by its timeout) and *finished* (every pod done).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

import aiohttp

from adapter.config import ScrapeSettings
from adapter.errors import ExpositionError, SourceUnavailable
from adapter.sources.discovery import Discovery, Target
from adapter.sources.evaluation import Snapshot
from adapter.sources.page_parser import Page, Parser
from adapter.sources.snapshots import History

log = logging.getLogger(__name__)

# vLLM's exact `/metrics` route always answers the classic text format; asking for it keeps a
# negotiating server (the `/metrics/` mount, other exporters) from sending OpenMetrics exemplars.
_ACCEPT: Final = {"Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1"}
_EXPOSITION_TYPES: Final = ("", "text/plain", "application/openmetrics-text")
# A scheduled round starting within this fraction of the interval after its tick is dated at the
# tick (Prometheus does the same within its `--scrape.timestamp-tolerance`), so replicas agree on
# sample times; later (a slow discovery, a busy loop), it is dated when it really started.
_TICK_TOLERANCE: Final = 0.1


def next_tick(now: float, interval: float) -> float:
    """The first multiple of `interval` (seconds since the epoch) strictly after `now`."""
    tick = (math.floor(now / interval) + 1) * interval
    return tick if tick > now else tick + interval  # `now / interval` may round up to a whole number


class _ScrapeError(Exception):
    """One pod's scrape failed; the message is the cause, without the URL."""


@dataclass
class Pod:
    """One target's scrape state."""

    target: Target
    history: History
    labels: dict[str, str] = field(default_factory=dict)
    page: Page | None = None
    """The latest successful page (kept after a failure, to tell whether the pod is relevant)."""
    scraped_at: float = math.nan
    """Unix start time of the latest successful scrape (Prometheus dates samples at scrape start)."""
    error: str | None = None
    """Why the latest scrape failed; `None` after a success."""
    attempted: bool = False
    """Whether a scrape of this pod has completed (successfully or not)."""

    def snapshot(self) -> Snapshot:
        """The pod as evaluation sees it (only valid once a scrape succeeded: `page` is set)."""
        assert self.page is not None
        return Snapshot(self.labels, self.scraped_at, self.page, self.history, self.target.url)


class PodScraper:
    """Scrapes the discovered pods in rounds, in a background task, keeping what metrics need."""

    def __init__(
        self,
        settings: ScrapeSettings,
        discovery: Discovery,
        *,
        observe: Callable[[str, float], None] | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.discovery = discovery
        self._observe = observe
        self._wall = wall
        # When rounds settle, against which a fetch judges how late it is; tests inject it.
        self._monotonic = monotonic
        self._parser = Parser()
        self._cumulative: tuple[str, ...] = ()
        self._retention = 0.0
        self.pods: dict[str, Pod] = {}
        """The current targets by URL."""
        self.discovery_error: str | None = None
        """Why the latest discovery refresh failed; `None` after a success."""
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()
        self._started_rounds = 0
        self.settled_rounds = 0
        """Rounds settled so far (see the module docstring)."""
        self.rounds = 0
        """Rounds finished so far."""
        self.last_settled = -math.inf
        """`monotonic()` when the latest round settled."""
        self._discovered_at = -math.inf
        self._discovery_due = True

    @property
    def discovery_bound(self) -> float:
        """How long one discovery refresh may take before the loop gives up on it (seconds)."""
        return min(max(self.settings.interval, 2.0), 10.0)

    def want_gauges(self, names: Iterable[str]) -> bool:
        """Start parsing the sample `names` (read from the latest page); return whether any is new."""
        return self._parser.want(names)

    def want_cumulative(self, names: Iterable[str], window: float) -> bool:
        """Start parsing and keeping `window` seconds of history of the cumulative sample `names`
        (histogram `_bucket`/`_sum`/`_count`); return whether any name is new."""
        wanted = tuple(names)
        self._cumulative = tuple(sorted({*self._cumulative, *wanted}))
        # One scrape interval of slack keeps the point just before the window for the next fetch.
        self._retention = max(self._retention, window + self.settings.interval)
        for pod in self.pods.values():
            pod.history.retention = self._retention
        return self._parser.want(wanted)

    def wake(self, *, discover: bool = False) -> None:
        """Start a round now instead of at the next tick; `discover` refreshes the targets first."""
        if discover:
            self._discovery_due = True
        self._wake.set()

    async def start(self) -> None:
        """Open the HTTP session and start the loop; a no-op once started."""
        if self._task is None:
            connector = aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True)
            self._session = aiohttp.ClientSession(connector=connector, headers=_ACCEPT)
            self._task = asyncio.create_task(self._run(), name="scrape loop")

    async def close(self) -> None:
        """Stop the loop and close the session; safe to call twice."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def await_round(self, *, fresh: bool, settled: bool = False) -> None:
        """Wait, at most about two intervals, for the end (or, `settled`, the settling) of the
        running round, or (`fresh`) of a round that starts after this call. Returns at the bound
        without raising: the caller judges what it has."""

        def reached() -> int:
            return self.settled_rounds if settled else self.rounds

        running = reached() < self._started_rounds
        wanted = self._started_rounds if running and not fresh else self._started_rounds + 1
        bound = self.settings.interval + self.settings.timeout + self.discovery_bound
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(bound):
                while reached() < wanted:
                    await self._progress.wait()

    def _signal(self) -> None:
        """Wake every `await_round`."""
        progress, self._progress = self._progress, asyncio.Event()
        progress.set()

    async def _run(self) -> None:
        tick: float | None = None  # the instant this round is scheduled for; None: woken, scrape now
        while True:
            self._wake.clear()
            try:
                await self._discover()
                await self._round(self._date(tick))
            except Exception:  # the loop must outlive any bug in one round
                log.exception("scrape round failed")
            # The next multiple of the interval, strictly after now: an overrun skips missed ticks
            # rather than bunching rounds up, and every replica on a synchronised clock scrapes the
            # pods at the same instants.
            tick = due = next_tick(self._wall(), self.settings.interval)
            while (remaining := due - self._wall()) > 0:
                try:
                    async with asyncio.timeout(remaining):
                        await self._wake.wait()
                except TimeoutError:
                    continue  # look at the clock again: a timer may fire a little early
                tick = None  # woken for a new namespace or metric: scrape now
                break

    def _date(self, tick: float | None) -> float:
        """The sample time of a round starting now: its tick when it starts within the tolerance
        after it (so replicas scraping at the same tick date their samples alike; the age is
        overstated by that little, never understated), else the actual start."""
        now = self._wall()
        if tick is not None and 0.0 <= now - tick <= _TICK_TOLERANCE * self.settings.interval:
            return tick
        return now

    async def _discover(self) -> None:
        now = time.monotonic()
        if now - self._discovered_at < self.discovery.interval and not self._discovery_due:
            return
        self._discovered_at, self._discovery_due = now, False
        try:
            async with asyncio.timeout(self.discovery_bound):
                await self.discovery.refresh()
            self.discovery_error = None
        except TimeoutError:
            self.discovery_error = f"target discovery timed out after {self.discovery_bound:g}s"
        except SourceUnavailable as exc:
            self.discovery_error = str(exc)
        if self.discovery_error is not None:
            log.warning("scrape target discovery failed: %s", self.discovery_error)
        current = {t.url: t for t in self.discovery.targets()}
        for url in [u for u in self.pods if u not in current]:
            del self.pods[url]  # a vanished pod takes its history with it
        for url, target in current.items():
            pod = self.pods.get(url)
            if pod is None or pod.target != target:
                self.pods[url] = Pod(target, History(self._retention), dict(target.labels))

    async def _round(self, dated: float) -> None:
        """Scrape every pod once, dating its samples `dated`; settle as soon as the pods that
        answered last time are done."""
        self._started_rounds += 1
        pods = list(self.pods.values())
        awaited = sum(1 for pod in pods if pod.error is None)

        def settle() -> None:
            if self.settled_rounds < self._started_rounds:
                self.settled_rounds = self._started_rounds
                self.last_settled = self._monotonic()
                self._signal()

        async def scrape(pod: Pod) -> None:
            nonlocal awaited
            counted = pod.error is None
            await self._scrape(pod, dated)
            if counted:
                awaited -= 1
                if awaited == 0:
                    settle()

        try:
            if awaited == 0:
                settle()
            await asyncio.gather(*(scrape(pod) for pod in pods))
        finally:
            settle()
            self.rounds += 1
            self._signal()

    async def _scrape(self, pod: Pod, started_at: float) -> None:
        url = pod.target.url
        started = time.monotonic()
        outcome = "error"
        was_failing = pod.error is not None
        try:
            async with asyncio.timeout(self.settings.timeout):
                body = await self._get(url)
            page = self._parse(body)
        except TimeoutError:
            outcome = "timeout"
            pod.error = f"timed out after {self.settings.timeout:g}s"
        except aiohttp.ClientError as exc:
            pod.error = f"{exc.__class__.__name__}: {exc}"
        except _ScrapeError as exc:
            pod.error = str(exc)
        except Exception as exc:  # one pod must never fail the round of the others
            log.exception("unexpected error scraping %s", url)
            pod.error = f"unexpected {exc.__class__.__name__}: {exc}"
        else:
            outcome = "success"
            pod.page, pod.scraped_at, pod.error = page, started_at, None
            pod.history.add(started_at, page, self._cumulative)
        finally:
            pod.attempted = True
            if self._observe is not None:
                self._observe(outcome, time.monotonic() - started)
        # Log changes of state only: a dead pod would otherwise log once a second until it is gone.
        if pod.error is not None and not was_failing:
            log.warning("unable to scrape %s: %s", url, pod.error)
        elif pod.error is None and was_failing:
            log.info("scraping %s again", url)

    async def _get(self, url: str) -> bytearray:
        assert self._session is not None
        async with self._session.get(url) as response:
            if response.status != 200:
                raise _ScrapeError(f"HTTP {response.status} {response.reason or ''}".rstrip())
            media_type = response.content_type if "Content-Type" in response.headers else ""
            if media_type not in _EXPOSITION_TYPES:
                raise _ScrapeError(
                    f"content type {media_type!r} must be text/plain or application/openmetrics-text"
                )
            return await self._read(response)

    async def _read(self, response: aiohttp.ClientResponse) -> bytearray:
        """The body, streamed, up to `max_body_bytes` (after decompression); a larger page fails
        without the rest being read: leaving the response unread closes its connection."""
        limit = self.settings.max_body_bytes
        too_large = f"page larger than {limit} bytes (scrape.max_body_bytes)"
        declared = response.content_length
        if declared is not None and declared > limit and "Content-Encoding" not in response.headers:
            raise _ScrapeError(f"{too_large}: Content-Length is {declared}")
        body = bytearray()
        async for chunk in response.content.iter_any():
            if len(body) + len(chunk) > limit:
                raise _ScrapeError(too_large)
            body += chunk
        return body

    def _parse(self, body: bytearray) -> Page:
        try:
            return self._parser.parse(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise _ScrapeError(
                f"unable to parse the exposition: not UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
        except ExpositionError as exc:
            raise _ScrapeError(f"unable to parse the exposition: {exc}") from None
