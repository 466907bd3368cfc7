"""The Prometheus source: instant queries against any Prometheus-compatible HTTP API.

One combined query per fetch (`adapter.vocabulary.promql.combined_query`) returns the value, the number of
target series, the sample time of every raw selector and the gauge gaps together
(`adapter.sources.prometheus_body` decodes it, `adapter.sources.prometheus_answer` reads it). A refresh of many keys of one metric (`fetch_many`)
sends one such query grouped by the labels the keys select on and slices it per key
(`adapter.sources.prometheus_groups`); keys no group can serve take their own query. Every query is evaluated at a time aligned down to the
refresh interval, so replicas answering the same key in the same interval send the same query and
get the same sample, and the sample time never goes backwards. An answer is read within the source
timeout (connecting, the whole body and parsing) and up to `max_body_bytes`, never buffered past it.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import math
import os
import ssl
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final, NamedTuple, TypeVar

import aiohttp

from adapter.clock import after_pending_io
from adapter.config import PrometheusSettings
from adapter.errors import AdapterError, PromQLSyntaxError, SourceUnavailable
from adapter.sources import Sample, Scope
from adapter.sources.prometheus_answer import Row, combined_sample, vector_items, vector_rows
from adapter.sources.prometheus_body import TAKEN, ResultReader, Steps, body_steps
from adapter.sources.prometheus_groups import Batch, Planner, Slices
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.promql import (
    PromQL,
    combined_query,
    freshness_selectors,
    presence_query,
    request_matchers,
    value_query,
)
from adapter.vocabulary.selectors import Selector

# Read size of the body stream; the limit is checked after each chunk, so at most this much past it.
_CHUNK: Final = 64 * 1024
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


async def _stepwise(steps: Steps[T]) -> T:
    """Run `steps` to its end, letting the event loop run other work (requests) at each of its yields."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        await after_pending_io()


class _SecretFile:
    """A credential file re-read whenever its modification time changes (rotated tokens)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._mtime: float | None = None
        self._value = ""

    def read(self) -> str:
        try:
            mtime = os.stat(self.path).st_mtime
            if mtime != self._mtime:
                with open(self.path, encoding="utf-8") as handle:
                    self._value = handle.read().strip()
                self._mtime = mtime
        except OSError as exc:
            raise SourceUnavailable(f"unable to read credential file {self.path!r}: {exc.strerror}") from exc
        return self._value


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
        self._session: aiohttp.ClientSession | None = None
        self._token = _SecretFile(settings.bearer_token_file) if settings.bearer_token_file else None
        auth = settings.basic_auth
        self._password = _SecretFile(auth.password_file) if auth else None
        #: optional callback(outcome: str, seconds: float) for the adapter's upstream metrics
        self._observe = observe
        #: per metric, the last refresh's scopes and their plan: kept while the keys are the same
        self._plans: dict[str, _KeptPlan] = {}

    def _ssl_context(self) -> ssl.SSLContext | bool:
        s = self.settings
        if not s.url.startswith("https://"):
            return True
        if s.insecure_skip_verify:
            return False
        context = ssl.create_default_context(cafile=s.ca_file)
        if s.cert_file and s.key_file:
            context.load_cert_chain(s.cert_file, s.key_file)
        return context

    async def start(self) -> None:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._ssl_context(), limit=64)
            self._session = aiohttp.ClientSession(connector=connector)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", **self.settings.headers}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token.read()}"
        elif self.settings.basic_auth is not None and self._password is not None:
            credentials = f"{self.settings.basic_auth.username}:{self._password.read()}"
            headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
        return headers

    def evaluation_time(self) -> float:
        """Now, aligned down to the refresh interval: every replica asks about the same instant."""
        interval = self.settings.refresh_interval
        return math.floor(self._wall() / interval) * interval

    async def query(
        self, promql: str, at: float | None = None, reader: ResultReader | None = None
    ) -> tuple[str, Any]:
        """Run an instant query (at Unix time `at`, else Prometheus' now); return `(resultType, result)`.
        A `reader` may take the result's elements as they are decoded (`body_steps`)."""
        if self._session is None:
            await self.start()
        assert self._session is not None
        url = self.settings.url.rstrip("/") + "/api/v1/query"
        timeout = self.settings.timeout
        form = {"query": promql, "timeout": f"{timeout:g}s"}
        if at is not None:
            form["time"] = f"{at:.3f}"
        started = time.monotonic()
        outcome = "error"
        try:
            async with asyncio.timeout(timeout) as deadline:
                async with self._session.post(url, data=form, headers=self._headers()) as response:
                    body = await self._read(response, url)
                result = await _stepwise(body_steps(response.status, body, reader))
                # The last part of the parse may end past the deadline without meeting a yield.
                if (when := deadline.when()) is not None and asyncio.get_running_loop().time() > when:
                    raise TimeoutError
            outcome = "success"
            return result
        except TimeoutError as exc:
            outcome = "timeout"
            raise SourceUnavailable(f"query to {url} timed out after {timeout:g}s") from exc
        except aiohttp.ClientError as exc:
            raise SourceUnavailable(f"unable to query {url}: {exc.__class__.__name__}: {exc}") from exc
        finally:
            if self._observe is not None:
                self._observe(outcome, time.monotonic() - started)

    async def _read(self, response: aiohttp.ClientResponse, url: str) -> bytearray:
        """The whole body, or `SourceUnavailable` as soon as it exceeds `max_body_bytes` (the rest unread)."""
        limit = self.settings.max_body_bytes
        declared = response.content_length
        if declared is not None and declared > limit:
            response.close()
            raise SourceUnavailable(
                f"answer from {url} is {declared} bytes, more than prometheus.max_body_bytes ({limit})"
            )
        body = bytearray()
        async for chunk in response.content.iter_chunked(_CHUNK):
            body += chunk
            if len(body) > limit:
                # Closing drops the connection: the rest of the body is never read nor buffered.
                response.close()
                raise SourceUnavailable(
                    f"answer from {url} exceeds prometheus.max_body_bytes ({limit} bytes); the rest was not read"
                )
        return body  # parsed as it is: a copy would double the memory of a large answer

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
