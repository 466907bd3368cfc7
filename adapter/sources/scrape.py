"""The scrape source: the adapter reads the vLLM pods' `/metrics` itself (DESIGN.md §1).

A background loop discovers the targets and scrapes all of them every `interval`, concurrently and
each with its own timeout, so a dead or slow pod costs only itself. Each pod keeps its latest page
(gauges) and the window of cumulative series its rates need (`snapshots.History`); `fetch` computes
from memory with the PromQL arithmetic of `snapshots`, so it means what the Prometheus source means.

Failure semantics per fetch, after scoping the pods to the namespace:

| situation                                              | answer                              |
|--------------------------------------------------------|-------------------------------------|
| no targets, or none with a matching series             | `NoTargets`                         |
| targets not scraped yet, or a rate with one scrape     | `SourceUnavailable` (warming up)    |
| discovery failed and there are no targets              | `SourceUnavailable`                 |
| every target that may hold the series failed           | `SourceUnavailable`                 |
| some failed, `on_partial: error`                       | `PartialFailure`                    |
| some failed, `on_partial: ignore-failed`               | the value over the pods that answered |

A failed pod whose last good scrape had no matching series (another model, say) is not counted.
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

from adapter.catalogue import GaugeSpec, HistogramSpec, MetricDef, PromQLSpec
from adapter.config import Config, ScrapeSettings
from adapter.errors import NoTargets, PartialFailure, SourceUnavailable
from adapter.promql import value_query
from adapter.selectors import Selector, promql_string
from adapter.sources import Sample
from adapter.sources.discovery import Discovery, EndpointSliceDiscovery, StaticDiscovery, Target
from adapter.sources.evaluation import Snapshot, evaluate, present
from adapter.sources.exposition import ExpositionError, Page, Parser, histogram_samples
from adapter.sources.snapshots import History
from adapter.telemetry import Telemetry

log = logging.getLogger(__name__)

# vLLM's exact `/metrics` route always answers the classic text format; asking for it keeps a
# negotiating server (the `/metrics/` mount, other exporters) from sending OpenMetrics exemplars.
_ACCEPT: Final = {"Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1"}
_EXPOSITION_TYPES: Final = ("", "text/plain", "application/openmetrics-text")
# A vLLM page is ~60 KB; anything past 16 MiB is not an exposition we want to hold in memory.
_MAX_BODY: Final = 16 * 1024 * 1024
# A fetch that finds the newest round older than this fraction of the interval waits for the next
# one. The value cache refreshes each key once per interval on its own clock; unaligned, a served
# sample would be up to two intervals old (p99 ~1.9 s at 1 s). Aligned, fetches land just after a
# round and the served age stays near one interval.
_ALIGN_FRACTION: Final = 0.3
# Causes quoted in one error message; a fleet-wide outage would otherwise log hundreds.
_CAUSES_SHOWN: Final = 3


class _ScrapeError(Exception):
    """One pod's scrape failed; the message is the cause, without the URL."""


@dataclass
class _Pod:
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

    def snapshot(self) -> Snapshot:
        assert self.page is not None
        return Snapshot(self.labels, self.scraped_at, self.page, self.history)


class ScrapeSource:
    """`Source` that scrapes vLLM pods directly."""

    name = "scrape"

    def __init__(
        self,
        settings: ScrapeSettings,
        metrics: Iterable[MetricDef] = (),
        *,
        discovery: Discovery,
        observe: Callable[[str, float], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.discovery = discovery
        self._observe = observe
        self._clock = clock
        self._parser = Parser()
        self._known: set[GaugeSpec | HistogramSpec] = set()
        self._cumulative: tuple[str, ...] = ()
        self._retention = 0.0
        self._pods: dict[str, _Pod] = {}
        for metric in metrics:
            self._want_metric(metric)
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()
        self._started_rounds = 0
        self._settled_rounds = 0
        self._finished_rounds = 0
        self._last_settled = -math.inf
        self._discovered_at = -math.inf
        self._discovery_due = True
        self._discovery_error: str | None = None

    @property
    def rounds(self) -> int:
        """Scrape rounds completed so far."""
        return self._finished_rounds

    # --- the Source protocol -------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is None:
            connector = aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True)
            self._session = aiohttp.ClientSession(connector=connector, headers=_ACCEPT)
            self._task = asyncio.create_task(self._run(), name="scrape loop")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def ping(self) -> None:
        await self.start()
        if self._finished_rounds == 0:
            await self._await_round(fresh=False)
        if self._finished_rounds == 0:
            raise SourceUnavailable("unable to scrape targets: no scrape round has completed yet")
        if self._discovery_error is not None and not self._pods:
            raise SourceUnavailable(self._discovery_error)

    def describe(self, metric: MetricDef, namespace: str | None, selector: Selector) -> str:
        where = f" in namespace {namespace!r}" if namespace is not None else ""
        matchers = [f"namespace={promql_string(namespace)}"] if namespace is not None else []
        matchers.extend(selector.to_promql())
        targets = [t for t in self.discovery.targets() if namespace is None or t.namespace == namespace]
        return "\n".join(
            (
                f"scrape:   {len(targets)} targets{where} every {self.settings.interval:g}s "
                f"(timeout {self.settings.timeout:g}s, on_partial {self.settings.on_partial})",
                f"computes: {value_query(metric, matchers)}",
            )
        )

    async def fetch(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        if not isinstance(metric.spec, GaugeSpec | HistogramSpec):
            raise SourceUnavailable(
                f"metric {metric.name!r} is user PromQL, which the scrape source cannot evaluate; "
                "use source 'prometheus'"
            )
        await self.start()
        new = self._want_metric(metric)
        if self.discovery.want(namespace):
            self._discovery_due = new = True
        if new:
            self._wake.set()
            await self._await_round(fresh=True)
        elif self._settled_rounds == 0 or (
            time.monotonic() - self._last_settled > _ALIGN_FRACTION * self.settings.interval
        ):
            await self._await_round(fresh=False, settled=True)
        return self._compute(metric, namespace, selector)

    # --- computing a value ---------------------------------------------------------------------

    def _compute(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        where = f" in namespace {namespace!r}" if namespace is not None else ""
        pods = [p for p in self._pods.values() if namespace is None or p.target.namespace == namespace]
        attempted = [p for p in pods if p.attempted]
        if not attempted:
            if pods:
                raise SourceUnavailable(
                    f"unable to compute {metric.name}: {len(pods)} targets{where} not scraped yet"
                )
            if self._discovery_error is not None:
                raise SourceUnavailable(f"unable to find targets{where}: {self._discovery_error}")
            scope = getattr(self.discovery, "scope", "the discovered targets")
            raise NoTargets(f"no scrape targets{where} for {metric.name} among {scope}")
        answered = [p.snapshot() for p in attempted if p.error is None and p.page is not None]
        failed = [
            p
            for p in attempted
            if p.error is not None and (p.page is None or present(metric, [p.snapshot()], selector))
        ]
        matching = present(metric, answered, selector)
        if failed:
            causes = "; ".join(f"{p.target.url}: {p.error}" for p in failed[:_CAUSES_SHOWN])
            if len(failed) > _CAUSES_SHOWN:
                causes += f" (and {len(failed) - _CAUSES_SHOWN} more)"
            if not matching:
                raise SourceUnavailable(
                    f"unable to scrape any of the {len(failed)} targets of {metric.name}{where}: {causes}"
                )
            if self.settings.on_partial == "error":
                raise PartialFailure(
                    f"unable to scrape {len(failed)} of {len(failed) + len(matching)} targets of "
                    f"{metric.name}{where}: {causes}"
                )
        sample = evaluate(metric, matching, selector, self._clock())
        if sample is None:
            raise NoTargets(
                f"no series of {metric.name} match the selector {str(selector)!r} on the "
                f"{len(answered)} scraped targets{where}"
            )
        return sample

    def _want_metric(self, metric: MetricDef) -> bool:
        """Start parsing the families `metric` reads; return whether any is new."""
        spec = metric.spec
        if not isinstance(spec, GaugeSpec | HistogramSpec) or spec in self._known:
            return False
        self._known.add(spec)
        if isinstance(spec, GaugeSpec):
            return self._parser.want(name for family in spec.families for name in family)
        names = [sample for name in spec.family for sample in histogram_samples(name)]
        self._cumulative = tuple(sorted({*self._cumulative, *names}))
        # One scrape interval of slack keeps the point just before the window for the next fetch.
        self._retention = max(self._retention, spec.window_seconds + self.settings.interval)
        for pod in self._pods.values():
            pod.history.retention = self._retention
        return self._parser.want(names)

    # --- the scrape loop -----------------------------------------------------------------------

    async def _await_round(self, *, fresh: bool, settled: bool = False) -> None:
        """Wait, at most about two intervals, for the end (or, `settled`, the settling) of the
        running round, or (`fresh`) of a round that starts after this call."""

        def reached() -> int:
            return self._settled_rounds if settled else self._finished_rounds

        running = reached() < self._started_rounds
        wanted = self._started_rounds if running and not fresh else self._started_rounds + 1
        bound = self.settings.interval + self.settings.timeout + self.discovery_bound
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(bound):
                while reached() < wanted:
                    await self._progress.wait()

    def _signal(self) -> None:
        """Wake every `_await_round`."""
        progress, self._progress = self._progress, asyncio.Event()
        progress.set()

    @property
    def discovery_bound(self) -> float:
        """How long one discovery refresh may take before the loop gives up on it (seconds)."""
        return min(max(self.settings.interval, 2.0), 10.0)

    async def _run(self) -> None:
        next_round = time.monotonic()
        while True:
            self._wake.clear()
            try:
                await self._discover()
                await self._round()
            except Exception:  # the loop must outlive any bug in one round
                log.exception("scrape round failed")
            next_round += self.settings.interval
            delay = next_round - time.monotonic()
            if delay < 0:  # the round overran: skip the missed ticks rather than bunch them up
                next_round = time.monotonic()
                continue
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
                next_round = time.monotonic()  # woken for a new namespace or metric: scrape now
            except TimeoutError:
                pass

    async def _discover(self) -> None:
        now = time.monotonic()
        if now - self._discovered_at < self.discovery.interval and not self._discovery_due:
            return
        self._discovered_at, self._discovery_due = now, False
        try:
            async with asyncio.timeout(self.discovery_bound):
                await self.discovery.refresh()
            self._discovery_error = None
        except TimeoutError:
            self._discovery_error = f"target discovery timed out after {self.discovery_bound:g}s"
        except SourceUnavailable as exc:
            self._discovery_error = str(exc)
        if self._discovery_error is not None:
            log.warning("scrape target discovery failed: %s", self._discovery_error)
        current = {t.url: t for t in self.discovery.targets()}
        for url in [u for u in self._pods if u not in current]:
            del self._pods[url]  # a vanished pod takes its history with it
        for url, target in current.items():
            pod = self._pods.get(url)
            if pod is None or pod.target != target:
                self._pods[url] = _Pod(target, History(self._retention), dict(target.labels))

    async def _round(self) -> None:
        """Scrape every pod once. The round *settles* when every pod that answered last time has
        answered or failed: a pod that keeps timing out must not age everyone's fresh samples by
        its timeout while fetches wait for it."""
        self._started_rounds += 1
        pods = list(self._pods.values())
        awaited = sum(1 for pod in pods if pod.error is None)

        def settle() -> None:
            if self._settled_rounds < self._started_rounds:
                self._settled_rounds = self._started_rounds
                self._last_settled = time.monotonic()
                self._signal()

        async def scrape(pod: _Pod) -> None:
            nonlocal awaited
            counted = pod.error is None
            await self._scrape(pod)
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
            self._finished_rounds += 1
            self._signal()

    async def _scrape(self, pod: _Pod) -> None:
        url = pod.target.url
        started_at = self._clock()
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

    async def _get(self, url: str) -> bytes:
        assert self._session is not None
        async with self._session.get(url) as response:
            if response.status != 200:
                raise _ScrapeError(f"HTTP {response.status} {response.reason or ''}".rstrip())
            media_type = response.content_type if "Content-Type" in response.headers else ""
            if media_type not in _EXPOSITION_TYPES:
                raise _ScrapeError(
                    f"content type {media_type!r} must be text/plain or application/openmetrics-text"
                )
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.content.iter_any():
                size += len(chunk)
                if size > _MAX_BODY:
                    raise _ScrapeError(f"page is larger than {_MAX_BODY} bytes")
                chunks.append(chunk)
            return b"".join(chunks)

    def _parse(self, body: bytes) -> Page:
        try:
            return self._parser.parse(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise _ScrapeError(
                f"unable to parse the exposition: not UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
        except ExpositionError as exc:
            raise _ScrapeError(f"unable to parse the exposition: {exc}") from None


def make_scrape_source(config: Config, telemetry: Telemetry) -> ScrapeSource:
    """The scrape source a configuration describes: static targets, else EndpointSlice discovery."""
    settings = config.scrape
    discovery: Discovery
    if settings.targets:
        discovery = StaticDiscovery(settings.targets, settings.namespace, settings.path)
    else:
        discovery = EndpointSliceDiscovery(settings)

    def observe(outcome: str, seconds: float) -> None:
        telemetry.observe_upstream("scrape", outcome, seconds)

    metrics = [m for m in config.catalogue() if not isinstance(m.spec, PromQLSpec)]
    return ScrapeSource(settings, metrics, discovery=discovery, observe=observe)
