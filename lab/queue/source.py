"""How the demo's adapter serves `queue_depth` and `dlq_depth`: the user's PromQL, evaluated on the queue
exporter's page, where a cluster's Prometheus would evaluate it on the exporter's scraped series.

The demo has no Prometheus, and the scrape source evaluates only the built-in vLLM metrics. So the
demo's adapter gets a `RoutedSource`: built-in metrics go to the scrape source over the fleet, user
PromQL metrics to an `ExporterSource` that fetches the exporter's `/metrics` at each fetch and evaluates
the configured query on it. The configuration is the one a cluster would use (the PromQL of
docs/config.example.yaml, checked by the adapter's loader), the provider applies the same failure table
(`presence`, `on_empty: error`, `max_age`) and the HPA reads the same API.

`ExporterSource` evaluates the shape those queries have, and no more: one instant-vector selector, bare
or inside `sum`, `max`, `min`, `avg` or `count` without grouping. Anything else is a 503 whose message
says so, never a guess.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Final

import aiohttp
import promql_parser

from adapter.catalogue import MetricDef, PromQLSpec
from adapter.errors import NoTargets, SourceUnavailable
from adapter.promql import request_matchers
from adapter.promql_parse import PromQLSyntaxError, parse_template
from adapter.selectors import Selector
from adapter.sources import Sample, Source
from adapter.sources.page_parser import ExpositionError, Labels, Parser

_AGGREGATIONS: Final[dict[str, Callable[[list[float]], float]]] = {
    "sum": math.fsum,
    "max": max,
    "min": min,
    "avg": lambda values: math.fsum(values) / len(values),
    "count": lambda values: float(len(values)),
}


def _member(value: object) -> str:
    """`MatchOp.Equal` → `Equal`, `TokenType` `sum` → `sum`."""
    return str(value).rsplit(".", 1)[-1]


def _matches(matcher: promql_parser.Matcher, labels: dict[str, str]) -> bool:
    value = labels.get(matcher.name, "")
    op = _member(matcher.op)
    if op == "Equal":
        return value == matcher.value
    if op == "NotEqual":
        return value != matcher.value
    # PromQL regular expressions are anchored at both ends.
    found = re.fullmatch(matcher.value, value) is not None
    return found if op == "Re" else not found


class _Query:
    """A parsed query of the supported shape: an optional aggregation over one selector."""

    def __init__(self, text: str, expr: promql_parser.Expr) -> None:
        while isinstance(expr, promql_parser.ParenExpr):
            expr = expr.expr
        self.aggregation: str | None = None
        if isinstance(expr, promql_parser.AggregateExpr) and expr.modifier is None and expr.param is None:
            self.aggregation = str(expr.op).lower()
            expr = expr.expr
            while isinstance(expr, promql_parser.ParenExpr):
                expr = expr.expr
        if (
            not isinstance(expr, promql_parser.VectorSelector)
            or (self.aggregation is not None and self.aggregation not in _AGGREGATIONS)
            or expr.offset is not None
            or expr.at is not None
            or expr.matchers.or_matchers
            or not expr.name
        ):
            raise SourceUnavailable(
                f"query {text!r} is beyond the demo's exporter source, which evaluates one named selector, "
                f"bare or in {'/'.join(_AGGREGATIONS)} without grouping"
            )
        self.name: str = expr.name
        self.matchers = list(expr.matchers.matchers)

    def series(self, page: dict[str, dict[Labels, float]]) -> list[float]:
        """The values of the page's series that the selector matches."""
        return [
            value
            for labels, value in page.get(self.name, {}).items()
            if all(_matches(m, dict(labels)) for m in self.matchers)
        ]

    def evaluate(self, page: dict[str, dict[Labels, float]]) -> float | None:
        """The query's value: `None` when no series matched (an empty instant vector)."""
        values = self.series(page)
        if not values:
            return None
        if self.aggregation is None:
            if len(values) > 1:
                raise SourceUnavailable(
                    f"selector {self.name} matches {len(values)} series of the exporter; aggregate them"
                )
            return values[0]
        return _AGGREGATIONS[self.aggregation](values)


def _parse(template: str, matchers: list[str]) -> _Query:
    try:
        expr = parse_template(template, matchers)
    except PromQLSyntaxError as error:  # the loader checked the template; matchers come from the request
        raise SourceUnavailable(f"unable to parse query {template!r}: {error}") from error
    return _Query(template, expr)


class ExporterSource:
    """`Source` for user PromQL metrics over one exporter's `/metrics` page, fetched at every fetch."""

    name = "exporter"

    def __init__(self, url: str, *, timeout: float = 2.0, clock: Callable[[], float] = time.time) -> None:
        self.url = url
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def ping(self) -> None:
        await self._page(Parser())

    def describe(self, metric: MetricDef, namespace: str | None, selector: Selector) -> str:
        spec = metric.spec
        query = spec.query if isinstance(spec, PromQLSpec) else "(not a user PromQL metric)"
        return f"exporter: {self.url}\nevaluates: {query}"

    async def fetch(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        spec = metric.spec
        if not isinstance(spec, PromQLSpec):
            raise SourceUnavailable(
                f"metric {metric.name!r} is not user PromQL; the exporter source has none"
            )
        matchers = request_matchers(metric, namespace, selector)
        query = _parse(spec.query, matchers)
        presence = None if spec.presence is None else _parse(spec.presence, matchers)
        names = {query.name} | ({presence.name} if presence else set())
        scraped = self._clock()
        page = await self._page(Parser(names))
        targets = None
        if presence is not None:
            targets = len(presence.series(page))
            if targets == 0:
                raise NoTargets(
                    f"no series of {presence.name} match {spec.presence!r} on the exporter {self.url}"
                )
        return Sample(query.evaluate(page), scraped, targets)

    async def _page(self, parser: Parser) -> dict[str, dict[Labels, float]]:
        await self.start()
        assert self._session is not None
        try:
            async with self._session.get(self.url) as response:
                if response.status != 200:
                    raise SourceUnavailable(
                        f"unable to scrape the exporter {self.url}: HTTP {response.status}"
                    )
                text = await response.text()
            return parser.parse(text)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise SourceUnavailable(f"unable to scrape the exporter {self.url}: {error!r}") from error
        except ExpositionError as error:
            raise SourceUnavailable(f"unable to read the exporter {self.url}: {error}") from error


class RoutedSource:
    """Built-in metrics from `builtin` (the scrape source), user PromQL metrics from `user` (the exporter)."""

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
        # The queue decides whether there is work; the fleet may rightly have no replica to scrape.
        await self.user.ping()

    def describe(self, metric: MetricDef, namespace: str | None, selector: Selector) -> str:
        return self._for(metric).describe(metric, namespace, selector)

    async def fetch(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        return await self._for(metric).fetch(metric, namespace, selector)
