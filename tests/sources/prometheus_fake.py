"""Answers of a fake Prometheus HTTP API for the Prometheus source's tests.

A small aiohttp server (the `prom` fixture in tests/sources/conftest.py) returns each response shape
of `/api/v1/query` (combined parts, empty, NaN, error, garbage, huge or slow bodies) so every row of
the source's failure table can be forced. Real Prometheus is used in tests/integration
(test_prometheus_source.py, test_prometheus_freshness.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web
from aiohttp.typedefs import Handler

from adapter.sources import Sample
from adapter.sources.prometheus import PrometheusSource
from adapter.vocabulary import catalogue
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.promql.combined import PART_LABEL, REF_LABEL
from adapter.vocabulary.selectors import parse

NOW = time.time()
WAITING = catalogue.builtin("vllm_requests_waiting")
INFLIGHT = catalogue.builtin("vllm_requests_inflight")
TTFT = catalogue.builtin("vllm_ttft_seconds")
SEL = parse("model_name=llama")


@dataclass(frozen=True)
class Seen:
    """One query the fake Prometheus received."""

    query: str
    time: str | None
    headers: dict[str, str]


class StartProm(Protocol):
    """The `prom` fixture: serve `handler` as `/api/v1/query`; a started source pointed at it (built with
    `wall` (its wall clock) and the `PrometheusSettings` fields in `settings`), and the queries it will
    see."""

    def __call__(
        self, handler: Handler, wall: Callable[[], float] | None = None, **settings: Any
    ) -> Awaitable[tuple[PrometheusSource, list[Seen]]]: ...


def vector(*parts: tuple[str, float | str] | tuple[str, float | str, dict[str, str]]) -> dict[str, Any]:
    """A success answer whose series carry `adapter_part` (and any extra labels); timestamp parts are
    numbered in order, as `promql.combined.combined_query` numbers its selectors."""
    result = []
    for index, (part, value, *extra) in enumerate(parts):
        labels = {PART_LABEL: part, **(extra[0] if extra else {})}
        if part == "timestamp":
            labels.setdefault(REF_LABEL, str(index))
        result.append({"metric": labels, "value": [NOW, str(value)]})
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def answer(document: object, status: int = 200) -> Handler:
    """A handler answering `document` (JSON-encoded unless it is already text) with `status`."""

    async def handler(request: web.Request) -> web.StreamResponse:
        text = document if isinstance(document, str) else json.dumps(document)
        return web.Response(text=text, status=status, content_type="application/json")

    return handler


async def fetch_once(
    prom: StartProm, document: object, metric: MetricDef = WAITING, **settings: Any
) -> Sample:
    """Fetch `metric` in namespace `prod` for `SEL` once from a Prometheus answering `document`."""
    source, _ = await prom(answer(document), **settings)
    try:
        return await source.fetch(metric, "prod", SEL)
    finally:
        await source.close()
