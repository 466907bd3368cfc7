"""The Prometheus source: instant queries against any Prometheus-compatible HTTP API.

One combined query per fetch (`adapter.promql.combined_query`) returns the value, the number of
target series and the oldest sample time together. Everything that is not a well-formed success
answer (a refused connection, a timeout, HTTP 5xx, `status: error`, HTML from a proxy, a JSON shape
we do not know) becomes `SourceUnavailable` with the precise cause in its message.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import math
import os
import ssl
import time
from collections.abc import Sequence
from typing import Any

import aiohttp

from adapter.catalogue import MetricDef, checked_value
from adapter.config import PrometheusSettings
from adapter.errors import NoTargets, SourceUnavailable
from adapter.promql import PART_LABEL, PromQL, combined_query, presence_query, request_matchers, value_query
from adapter.selectors import Selector
from adapter.sources import Sample

log = logging.getLogger(__name__)

# An error body from a misconfigured proxy can be a whole HTML page; the log needs only its start.
_BODY_EXCERPT = 200


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

    def __init__(self, settings: PrometheusSettings, *, observe: Any = None) -> None:
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None
        self._token = _SecretFile(settings.bearer_token_file) if settings.bearer_token_file else None
        auth = settings.basic_auth
        self._password = _SecretFile(auth.password_file) if auth else None
        #: optional callback(outcome: str, seconds: float) for the adapter's upstream metrics
        self._observe = observe

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

    async def query(self, promql: str) -> tuple[str, Any]:
        """Run an instant query; return `(resultType, result)` of a success answer."""
        if self._session is None:
            await self.start()
        assert self._session is not None
        url = self.settings.url.rstrip("/") + "/api/v1/query"
        timeout = self.settings.timeout
        started = time.monotonic()
        outcome = "error"
        try:
            async with asyncio.timeout(timeout):
                async with self._session.post(
                    url,
                    data={"query": promql, "timeout": f"{timeout:g}s"},
                    headers=self._headers(),
                ) as response:
                    body = await response.text()
                    status = response.status
            result = _parse_response(status, body)
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

    async def ping(self) -> None:
        await self.query("vector(1)")

    def describe(self, metric: MetricDef, namespace: str | None, selector: Selector) -> str:
        matchers = request_matchers(metric, namespace, selector)
        lines = [f"value:    {value_query(metric, matchers)}"]
        presence = presence_query(metric, matchers)
        if presence is not None:
            lines.append(f"presence: {presence}")
        return "\n".join(lines)

    async def fetch(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        matchers = request_matchers(metric, namespace, selector)
        promql: PromQL = combined_query(metric, matchers)
        result_type, result = await self.query(promql)
        if presence_query(metric, matchers) is None:
            return _plain_sample(metric, result_type, result)
        return _combined_sample(metric, result_type, result)


def _parse_response(status: int, body: str) -> tuple[str, Any]:
    excerpt = body[:_BODY_EXCERPT]
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise SourceUnavailable(f"Prometheus answered HTTP {status} with non-JSON body {excerpt!r}") from exc
    if not isinstance(document, dict):
        raise SourceUnavailable(f"Prometheus answered HTTP {status} with unexpected JSON {excerpt!r}")
    if document.get("status") != "success":
        raise SourceUnavailable(
            f"Prometheus answered HTTP {status} {document.get('errorType', 'unknown')}: "
            f"{str(document.get('error', excerpt))[:_BODY_EXCERPT]}"
        )
    data = document.get("data")
    if not isinstance(data, dict) or "resultType" not in data or "result" not in data:
        raise SourceUnavailable(f"Prometheus success answer without data.resultType/result: {excerpt!r}")
    return str(data["resultType"]), data["result"]


def _number(pair: Any) -> tuple[float, float]:
    """`[timestamp, "value"]` → floats; anything else is garbage."""
    if not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2:
        raise SourceUnavailable(f"malformed sample {pair!r}; expected [timestamp, value]")
    try:
        return float(pair[0]), float(pair[1])
    except (TypeError, ValueError) as exc:
        raise SourceUnavailable(f"malformed sample {pair!r}; expected [timestamp, value]") from exc


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _vector(result_type: str, result: Any) -> list[tuple[dict[str, str], float, float]]:
    if result_type != "vector" or not isinstance(result, list):
        raise SourceUnavailable(f"expected an instant vector, got resultType {result_type!r}")
    rows = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            raise SourceUnavailable(f"malformed vector element {item!r}")
        ts, value = _number(item.get("value"))
        rows.append((item["metric"], ts, value))
    return rows


def _plain_sample(metric: MetricDef, result_type: str, result: Any) -> Sample:
    """A user query without presence: scalar or single-series vector; the timestamp is evaluation time."""
    if result_type == "scalar":
        ts, value = _number(result)
        return Sample(_finite(value), ts)
    rows = _vector(result_type, result)
    if not rows:
        return Sample(None, time.time())
    if len(rows) > 1:
        raise SourceUnavailable(
            f"query for {metric.name} returned {len(rows)} series; aggregate it to one, e.g. with sum()"
        )
    _labels, ts, value = rows[0]
    return Sample(checked_value(metric, _finite(value)), ts)


def _combined_sample(metric: MetricDef, result_type: str, result: Any) -> Sample:
    parts: dict[str, list[tuple[float, float]]] = {}
    for labels, ts, value in _vector(result_type, result):
        parts.setdefault(labels.get(PART_LABEL, "value"), []).append((ts, value))
    values = parts.get("value", [])
    if len(values) > 1:
        raise SourceUnavailable(
            f"query for {metric.name} returned {len(values)} value series; aggregate it to one, e.g. with sum()"
        )
    count = parts.get("count", [])
    targets = int(count[0][1]) if count else 0
    if targets == 0:
        raise NoTargets(f"no series of {metric.name} match the namespace and selector")
    stamps = parts.get("timestamp", [])
    timestamp = stamps[0][1] if stamps else count[0][0]
    found = _finite(values[0][1]) if values else None
    return Sample(checked_value(metric, found), timestamp, targets)
