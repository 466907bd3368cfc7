"""The demo's stand-in for Prometheus: user PromQL metrics evaluated on the pages of the demo's targets.

A cluster evaluates `queue_depth`, `dlq_depth` or any user metric with Prometheus; the demo has none, and
the scrape source evaluates only the built-in vLLM metrics. So the demo's adapter gets a `RoutedSource`:
built-in metrics go to the scrape source, user PromQL metrics to a `PageSource`, which scrapes its
targets (the queue's exporter, the gateway, the Ready replicas) at every fetch, keeps their recent
pages for `rate()`, and evaluates the configured query. The configuration is the one a cluster would
use (checked by the adapter's own loader), the provider applies the same failure table, and the HPA
reads the same API.

`PageSource` evaluates a small part of PromQL (`lab.demo.cluster.promql_eval`) and refuses the rest with a 503
that says so, never a guess. Range windows are in wall-clock seconds, as the adapter's clock is; the
demo writes them divided by its time scale.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import aiohttp
import promql_parser
import yaml

from adapter.config import Config, load
from adapter.errors import ExpositionError, NoTargets, PromQLSyntaxError, SourceUnavailable
from adapter.sources import Sample, Source
from adapter.sources.page_parser import Parser
from adapter.vocabulary.catalogue import MetricDef, PromQLSpec
from adapter.vocabulary.promql.expressions import request_matchers
from adapter.vocabulary.promql.parse import parse_template
from adapter.vocabulary.selectors import Selector
from lab.demo.cluster.embedded import adapter_config
from lab.demo.cluster.promql_eval import Evaluator, Scrapes, Unsupported, Value, names


class PageSource:
    """`Source` for user PromQL metrics over the pages of `targets()` (URLs), scraped at every fetch."""

    name = "pages"

    def __init__(
        self,
        targets: Callable[[], Sequence[str]],
        *,
        timeout: float = 2.0,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.targets = targets
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._wall = wall
        self._session: aiohttp.ClientSession | None = None
        self.scrapes = Scrapes()

    async def start(self) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def ping(self) -> None:
        for target in self.targets():
            await self._text(target)

    def describe(self, metric: MetricDef, namespace: str | None, selector: Selector) -> str:
        spec = metric.spec
        query = spec.query if isinstance(spec, PromQLSpec) else "(not a user PromQL metric)"
        return f"pages: {', '.join(self.targets())}\nevaluates: {query}"

    async def fetch(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        spec = metric.spec
        if not isinstance(spec, PromQLSpec):
            raise SourceUnavailable(f"metric {metric.name!r} is not user PromQL; the page source has none")
        matchers = request_matchers(metric, namespace, selector)
        query = _parse(spec.query, matchers)
        presence = None if spec.presence is None else _parse(spec.presence, matchers)
        wanted = names(query) | (names(presence) if presence is not None else set())
        targets = list(self.targets())
        scraped = self._wall()
        await self._scrape(targets, Parser(wanted), scraped)
        evaluator = Evaluator(self.scrapes, targets, scraped)
        count = None
        if presence is not None:
            found = evaluator.value(presence)
            count = len(found) if isinstance(found, list) else 1
            if count == 0:
                raise NoTargets(f"no series match the presence selector {spec.presence!r} on {targets}")
        return Sample(_single(evaluator.value(query)), scraped, count)

    async def _scrape(self, targets: Sequence[str], parser: Parser, at: float) -> None:
        texts = await asyncio.gather(*(self._text(t) for t in targets))
        for target, text in zip(targets, texts, strict=True):
            try:
                self.scrapes.add(target, at, parser.parse(text))
            except ExpositionError as error:
                raise SourceUnavailable(f"unable to read {target}: {error}") from error

    async def _text(self, url: str) -> str:
        await self.start()
        assert self._session is not None
        try:
            async with self._session.get(url) as response:
                if response.status != 200:
                    raise SourceUnavailable(f"unable to scrape {url}: HTTP {response.status}")
                return await response.text()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise SourceUnavailable(f"unable to scrape {url}: {error!r}") from error


def _parse(template: str, matchers: list[str]) -> promql_parser.Expr:
    try:
        return parse_template(template, matchers)
    except PromQLSyntaxError as error:  # the loader checked the template; matchers come from the request
        raise SourceUnavailable(f"unable to parse query {template!r}: {error}") from error


def _single(value: Value) -> float | None:
    """A query's value as a metric: a number, the one series of a vector, or `None` for an empty one."""
    if not isinstance(value, list):
        return value
    if len(value) > 1:
        raise Unsupported(f"the query returned {len(value)} series; aggregate them into one")
    return value[0][1] if value else None


class RoutedSource:
    """Built-in metrics from `builtin` (the scrape source), user PromQL metrics from `user` (pages)."""

    name = "demo"

    def __init__(self, builtin: Source, user: Source) -> None:
        self.builtin = builtin
        self.user = user

    def _for(self, metric: MetricDef) -> Source:
        return self.user if isinstance(metric.spec, PromQLSpec) else self.builtin

    async def start(self) -> None:
        await self.builtin.start()
        await self.user.start()

    async def close(self) -> None:
        await self.builtin.close()
        await self.user.close()

    async def ping(self) -> None:
        # The upstream's pages answer while the fleet may rightly have no replica to scrape.
        await self.user.ping()

    def describe(self, metric: MetricDef, namespace: str | None, selector: Selector) -> str:
        return self._for(metric).describe(metric, namespace, selector)

    async def fetch(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        return await self._for(metric).fetch(metric, namespace, selector)


def stand_in_config(namespace: str, scrape_interval: float, metrics: dict[str, dict[str, object]]) -> Config:
    """The demo adapter's configuration with user metrics: the scrape settings of `adapter_config`, the
    user metrics checked as the loader checks them for a Prometheus source (whose refresh and staleness
    settings the value cache then uses, the scrape source's), and nothing that reaches a Prometheus."""
    scrape = adapter_config(namespace, scrape_interval).scrape
    document = {
        "source": "prometheus",
        "prometheus": {"refresh_interval": scrape.interval, "max_age": scrape.max_age},
        "scrape": {
            "interval": scrape.interval,
            "timeout": scrape.timeout,
            "max_age": scrape.max_age,
            "namespace": namespace,
        },
        "server": {"address": "127.0.0.1", "insecure_serving": True},
        "logging": {"level": "warning"},
        "metrics": metrics,
    }
    return load(yaml.safe_dump(document))
