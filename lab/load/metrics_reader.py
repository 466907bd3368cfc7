"""The server's side of a profile: `/metrics` read on a timer into snapshots of the series it needs.

A snapshot holds one model's running and waiting requests, KV usage, preemptions, generated tokens,
and the TTFT and TPOT histograms, summed over its engines (data-parallel ranks); KV usage is their mean. Names
come from `adapter.vocabulary.vllm`, older aliases included, and the page is read with the adapter's own
parser.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import aiohttp

from adapter.errors import ExpositionError
from adapter.sources.page_parser import Labels, Page, Parser, histogram_samples
from adapter.sources.snapshots import bucket_quantile
from adapter.vocabulary import vllm
from adapter.vocabulary.catalogue import CORE_GAUGES
from lab.clock import ScaledClock

_HISTOGRAMS: Final = (vllm.TTFT, vllm.TPOT)
# Polls that may fail in a row (a busy server's slow answer) before the reader reports it cannot read.
_FAILURES_TOLERATED: Final = 5


class NotVllm(Exception):
    """The page has no `vllm:` series: not vLLM, or vLLM started with `--disable-log-stats`."""


@dataclass(frozen=True)
class Histogram:
    """Cumulative bucket counts (by upper bound, `+Inf` last), sum and count of one histogram."""

    bounds: tuple[float, ...] = ()
    cumulative: tuple[float, ...] = ()
    sum: float = 0.0
    count: float = 0.0

    def minus(self, earlier: Histogram) -> Histogram:
        """The observations made since `earlier` (the same histogram, read before)."""
        if earlier.bounds != self.bounds:
            return self
        counts = tuple(a - b for a, b in zip(self.cumulative, earlier.cumulative, strict=True))
        return Histogram(self.bounds, counts, self.sum - earlier.sum, self.count - earlier.count)

    def quantile(self, q: float) -> float | None:
        """`histogram_quantile` exactly as Prometheus computes it (the scrape source's own arithmetic);
        `None` without data."""
        if not self.cumulative or self.cumulative[-1] <= 0:
            return None
        return bucket_quantile(q, zip(self.bounds, self.cumulative, strict=True))

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None


@dataclass(frozen=True)
class Snapshot:
    """One read of `/metrics` at `at` (the profile's clock), with the client's in-flight count then."""

    at: float
    running: float
    waiting: float
    kv_usage: float
    preemptions: float
    generation_tokens: float = 0.0
    ttft: Histogram = field(default_factory=Histogram)
    tpot: Histogram = field(default_factory=Histogram)
    inflight: int = 0


@dataclass(frozen=True)
class CacheConfig:
    """What `vllm:cache_config_info` says of the KV cache (per engine)."""

    num_gpu_blocks: int | None
    block_size: int | None


def _names() -> list[str]:
    names = [name for family in CORE_GAUGES for name in family]
    names += [sample for family in _HISTOGRAMS for name in family for sample in histogram_samples(name)]
    return [*names, *vllm.NUM_PREEMPTIONS, *vllm.GENERATION_TOKENS, *vllm.CACHE_CONFIG_INFO]


def is_vllm(text: str) -> bool:
    """Whether an exposition has any `vllm:` sample."""
    return text.startswith("vllm:") or "\nvllm:" in text


class PageReader:
    """Turns one model's part of a vLLM page into a `Snapshot`."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.parser = Parser(_names())

    def read(self, text: str, at: float, inflight: int = 0) -> Snapshot:
        """The snapshot of `text`; `NotVllm` when it has no `vllm:` series, `ExpositionError` if malformed."""
        if not is_vllm(text):
            raise NotVllm("its /metrics has no vllm: series (not vLLM, or started with --disable-log-stats)")
        page = self.parser.parse(text)
        running, waiting, kv = (self._values(page, family) for family in CORE_GAUGES)
        return Snapshot(
            at=at,
            running=sum(running),
            waiting=sum(waiting),
            kv_usage=sum(kv) / len(kv) if kv else 0.0,
            preemptions=sum(self._values(page, vllm.NUM_PREEMPTIONS)),
            generation_tokens=sum(self._values(page, vllm.GENERATION_TOKENS)),
            ttft=self._histogram(page, vllm.TTFT),
            tpot=self._histogram(page, vllm.TPOT),
            inflight=inflight,
        )

    def models(self, text: str) -> set[str]:
        """The `model_name` values of the page's running-requests gauge."""
        page = self.parser.parse(text)
        return {
            dict(labels).get(vllm.MODEL_LABEL, "") for labels in page.get(vllm.NUM_REQUESTS_RUNNING[0], {})
        }

    def cache_config(self, text: str) -> CacheConfig:
        """Blocks and block size from `vllm:cache_config_info` (the first engine's)."""
        series = self.parser.parse(text).get(vllm.CACHE_CONFIG_INFO[0], {})
        for labels in series:
            found = dict(labels)
            return CacheConfig(_int(found.get("num_gpu_blocks")), _int(found.get("block_size")))
        return CacheConfig(None, None)

    def _mine(self, series: dict[Labels, float]) -> list[tuple[dict[str, str], float]]:
        return [
            (d, v) for labels, v in series.items() if (d := dict(labels)).get(vllm.MODEL_LABEL) == self.model
        ]

    def _values(self, page: Page, family: vllm.Family) -> list[float]:
        for name in family:
            if name in page:
                return [value for _labels, value in self._mine(page[name])]
        return []

    def _histogram(self, page: Page, family: vllm.Family) -> Histogram:
        for name in family:
            buckets, total, count = histogram_samples(name)
            if buckets not in page:
                continue
            by_bound: dict[float, float] = {}
            for labels, value in self._mine(page[buckets]):
                bound = float(labels.get("le", "nan"))
                by_bound[bound] = by_bound.get(bound, 0.0) + value
            bounds = tuple(sorted(by_bound))
            return Histogram(
                bounds,
                tuple(by_bound[b] for b in bounds),
                sum(v for _l, v in self._mine(page.get(total, {}))),
                sum(v for _l, v in self._mine(page.get(count, {}))),
            )
        return Histogram()


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "None") else None
    except ValueError:
        return None


class MetricsReader:
    """Reads `url/metrics` every `interval` real seconds in the background, keeping every snapshot."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        url: str,
        model: str,
        clock: ScaledClock,
        inflight: Callable[[], int] = lambda: 0,
        interval: float = 0.25,
    ) -> None:
        self.session = session
        self.url = url.rstrip("/") + "/metrics"
        self.reader = PageReader(model)
        self.clock = clock
        self.inflight = inflight
        self.interval = interval
        self.snapshots: list[Snapshot] = []
        self.error: str | None = None
        """Set when `_FAILURES_TOLERATED` polls in a row failed: why the last one did."""
        self._task: asyncio.Task[None] | None = None
        self._failures = 0

    async def fetch(self) -> Snapshot:
        """Read the page once; raises `aiohttp.ClientError`, `NotVllm` or `ExpositionError`."""
        inflight = self.inflight()
        async with self.session.get(self.url, timeout=aiohttp.ClientTimeout(total=10)) as response:
            if response.status != 200:
                raise aiohttp.ClientResponseError(
                    response.request_info, (), status=response.status, message=f"HTTP {response.status}"
                )
            text = await response.text()
        return self.reader.read(text, self.clock.now(), inflight)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._poll(), name="profile-metrics")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def between(self, start: float, end: float) -> list[Snapshot]:
        """Snapshots taken in [start, end] (the profile's clock)."""
        return [s for s in self.snapshots if start <= s.at <= end]

    async def _poll(self) -> None:
        while True:
            try:
                self.snapshots.append(await self.fetch())
                self._failures = 0
            except (aiohttp.ClientError, TimeoutError, NotVllm, ExpositionError) as error:
                self._failures += 1
                if self._failures >= _FAILURES_TOLERATED:
                    self.error = f"unable to read {self.url}: {error}"
            await asyncio.sleep(self.interval)
