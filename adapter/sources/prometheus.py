"""The Prometheus source: instant queries against any Prometheus-compatible HTTP API.

One combined query per fetch (`adapter.vocabulary.promql.combined.combined_query`) returns the value, the
number of target series, the sample time of every raw selector and the gauge gaps together
(`adapter.sources.prometheus_body` decodes it, `adapter.sources.prometheus_answer` reads it). A refresh of
many keys of one metric (`fetch_many`) sends one such query grouped by the labels the keys select on and
slices it per key (`adapter.sources.prometheus_groups`); keys no group can serve take their own query. Every
query is evaluated at a time aligned down to the refresh interval, so replicas answering the same key in the
same interval send the same query and get the same sample, and the sample time never goes backwards. The HTTP
round trip (TLS, credentials, the deadline and the body's size limit) is
`adapter.sources.prometheus_api`'s.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final, NamedTuple, TypeVar

from adapter.clock import after_pending_io
from adapter.config import PrometheusSettings
from adapter.errors import AdapterError, PromQLSyntaxError, SourceUnavailable
from adapter.sources import Sample, Scope
from adapter.sources.prometheus_answer import Row, combined_sample, vector_items, vector_rows
from adapter.sources.prometheus_api import PrometheusAPI
from adapter.sources.prometheus_body import TAKEN, ResultReader
from adapter.sources.prometheus_groups import Batch, Planner, Slices
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.promql.catalogue import presence_query, value_query
from adapter.vocabulary.promql.combined import combined_query, freshness_selectors
from adapter.vocabulary.promql.expressions import PromQL, request_matchers
from adapter.vocabulary.selectors import Selector

# Rows of a grouped answer read between two yields to the event loop, where an answer's body was
# decoded at once (`json.loads`: rare, see `body_steps`); read as decoded, `body_steps` paces itself.
_ROWS_PER_TURN: Final = 200
# Keys judged from their group's facts between two yields: a microsecond or two each.
_KEYS_PER_TURN: Final = 100
# Scopes planned between two yields (`Planner.add` for each): about a tenth of a millisecond.
_SCOPES_PER_TURN: Final = 200
T = TypeVar("T")


async def _parts(items: Sequence[T], size: int) -> AsyncIterator[tuple[int, Sequence[T]]]:
    """`items` a part of `size` at a time, with the part's start, yielding to the event loop before
    each part (the step before, such as parsing the answer, is a block of its own)."""
    for start in range(0, len(items), size):
        await after_pending_io()
        yield start, items[start : start + size]


class PrometheusSource:
    """`Source` over `/api/v1/query`."""

    name = "prometheus"

    def __init__(
        self,
        settings: PrometheusSettings,
        *,
        observe: Callable[[str, float], None] | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._wall = wall
        self._api = PrometheusAPI(settings, observe)
        #: per metric, the last refresh's scopes and their plan: kept while the keys are the same
        self._plans: dict[str, _KeptPlan] = {}

    async def start(self) -> None:
        await self._api.start()

    async def close(self) -> None:
        await self._api.close()

    async def query(
        self, promql: str, at: float | None = None, reader: ResultReader | None = None
    ) -> tuple[str, Any]:
        """An instant query (`PrometheusAPI.query`): `(resultType, result)`."""
        return await self._api.query(promql, at, reader)

    def evaluation_time(self) -> float:
        """Now, aligned down to the refresh interval: every replica asks about the same instant."""
        interval = self.settings.refresh_interval
        return math.floor(self._wall() / interval) * interval

    async def ping(self) -> None:
        await self.query("vector(1)")

    def describe(self, metric: MetricDef, namespace: str | None, selector: Selector) -> str:
        matchers = request_matchers(metric, namespace, selector)
        lines = [f"value:    {value_query(metric, matchers)}"]
        presence = presence_query(metric, matchers)
        if presence is not None:
            lines.append(f"presence: {presence}")
        lines.append(f"age of:   {', '.join(freshness_selectors(metric, matchers)) or 'the evaluation time'}")
        return "\n".join(lines)

    async def fetch(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        # A key's first fetch: from then on `fetch_many` refreshes it, mostly in a grouped query, so
        # its own query (kilobytes of PromQL) is not kept for a next time that seldom comes.
        return await self._fetch_at(metric, namespace, selector, self.evaluation_time(), remember=False)

    async def _rows(self, plan: _Plan, at: float) -> list[Row]:
        result_type, result = await self.query(plan.promql, at)
        return vector_rows(result_type, result)

    async def _fetch_at(
        self,
        metric: MetricDef,
        namespace: str | None,
        selector: Selector,
        at: float,
        *,
        remember: bool = True,
    ) -> Sample:
        matchers = tuple(request_matchers(metric, namespace, selector))
        the_plan = _checked_plan(metric, matchers, remember=remember)
        rows = await self._rows(the_plan, at)
        return combined_sample(metric, rows, evaluated_at=at, counted=the_plan.counted, dated=the_plan.dated)

    async def _planned(self, metric: MetricDef, scopes: Sequence[Scope]) -> _KeptPlan:
        """The batches and lone keys of `scopes`: the last refresh's while the scopes are the same (a
        fleet's keys mostly are), else planned a part at a time between turns of the event loop."""
        asked = tuple(scopes)
        kept = self._plans.get(metric.name)
        if kept is not None and kept.metric == metric and kept.scopes == asked:
            return kept
        planner = Planner(metric)
        async for start, part in _parts(asked, _SCOPES_PER_TURN):
            for index, scope in enumerate(part, start):
                planner.add(index, scope)
        batches, alone = planner.plan()
        kept = self._plans[metric.name] = _KeptPlan(
            metric,
            asked,
            [_KeptBatch(batch, tuple(batch.matchers()), batch.last_readers()) for batch in batches],
            alone,
        )
        return kept

    async def fetch_many(self, metric: MetricDef, scopes: Sequence[Scope]) -> list[Sample | AdapterError]:
        """Every scope's `fetch`, at one evaluation time, in one query per `Batch` plus one per other key."""
        at = self.evaluation_time()
        kept = await self._planned(metric, scopes)
        outcomes: list[Sample | AdapterError] = [SourceUnavailable("not fetched")] * len(scopes)

        async def own(index: int) -> None:
            scope = scopes[index]
            try:
                outcomes[index] = await self._fetch_at(metric, scope.namespace, scope.selector, at)
            except AdapterError as exc:
                outcomes[index] = exc

        async def shared(kept_batch: _KeptBatch) -> None:
            batch = kept_batch.batch
            slices = Slices(batch.by)
            try:
                the_plan = _checked_plan(metric, kept_batch.matchers, batch.by)
                result_type, result = await self.query(the_plan.promql, at, slices)
                items = vector_items(result_type, result)
                if result is not TAKEN:  # decoded at once (or answered by a stand-in): read here
                    slices.begin()
                    async for _, part in _parts(items, _ROWS_PER_TURN):
                        slices.read(list(part))
                del result, items
                slices.check()
            except AdapterError as exc:  # the round trip failed: so would each key's own query
                for index in batch.indices:
                    outcomes[index] = exc
                return
            async for start, part in _parts(batch.indices, _KEYS_PER_TURN):
                end = start + len(part)
                members = zip(part, batch.groups[start:end], kept_batch.last[start:end], strict=True)
                for index, group, last in members:
                    outcomes[index] = slices.sample(
                        metric,
                        group,
                        last=last,
                        evaluated_at=at,
                        counted=the_plan.counted,
                        dated=the_plan.dated,
                    )

        await asyncio.gather(
            *(shared(batch) for batch in kept.batches), *(own(index) for index in kept.alone)
        )
        return outcomes


class _KeptBatch(NamedTuple):
    """A batch of a kept plan, with what each refresh of it reads."""

    batch: Batch
    matchers: tuple[str, ...]
    last: list[bool]
    """`Batch.last_readers`."""


class _KeptPlan(NamedTuple):
    """A metric's scopes as last refreshed, and how they were batched."""

    metric: MetricDef
    scopes: tuple[Scope, ...]
    batches: list[_KeptBatch]
    alone: list[int]


class _Plan(NamedTuple):
    promql: PromQL
    counted: bool
    """The query has a `count` part (the metric has a presence query)."""
    dated: bool
    """The query has `timestamp` parts (raw selectors to date the value by)."""


def _checked_plan(
    metric: MetricDef, matchers: tuple[str, ...], by: tuple[str, ...] = (), *, remember: bool = True
) -> _Plan:
    """The plan of a query, kept for the next refresh when `remember` (the fallback keys' and the
    batches' queries, rendered on every refresh)."""
    try:
        return _plan(metric, matchers, by) if remember else _plan.__wrapped__(metric, matchers, by)
    except PromQLSyntaxError as exc:  # the configuration check parsed it; a selector cannot break it
        raise SourceUnavailable(f"query of {metric.name} is not valid PromQL: {exc}") from exc


@functools.lru_cache(maxsize=4096)
def _plan(metric: MetricDef, matchers: tuple[str, ...], by: tuple[str, ...]) -> _Plan:
    """A key's (or a batch's, grouped `by`) combined query and what its answer holds, rendered once per
    (metric, matchers, by): a batch and a key on its own query are queried on every refresh, and
    rendering user PromQL parses it several times."""
    return _Plan(
        combined_query(metric, matchers, by),
        presence_query(metric, matchers) is not None,
        bool(freshness_selectors(metric, matchers)),
    )
