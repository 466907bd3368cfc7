"""The Prometheus source's failures: anything but a well-formed success answer, read in time and
within its size limit, is `SourceUnavailable` with the precise cause, never a value.

The Prometheus HTTP API is faked (tests/sources/prometheus_fake.py, the `prom` fixture) so every
bad answer can be forced: errors, garbage, slow or endless bodies, a refused connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time

import pytest
from aiohttp import web
from aiohttp.typedefs import Handler

from adapter.config import PrometheusSettings
from adapter.errors import SourceUnavailable
from adapter.sources.prometheus import PrometheusSource
from tests.sources.prometheus_fake import NOW, SEL, WAITING, StartProm, answer, fetch_once, vector


@pytest.mark.parametrize(
    ("handler", "cause"),
    [
        pytest.param(answer("<html>bad gateway</html>", 502), "non-JSON body", id="html from a proxy"),
        pytest.param(answer("", 200), "non-JSON body", id="empty body"),
        pytest.param(answer([1, 2]), "unexpected JSON", id="json that is not an object"),
        pytest.param(
            answer({"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}, 400),
            "bad_data: parse error",
            id="prometheus error answer",
        ),
        pytest.param(
            answer({"status": "error", "errorType": "timeout", "error": "query timed out"}, 503),
            "timeout",
            id="prometheus query timeout",
        ),
        pytest.param(answer({"status": "success"}), "without data", id="success without data"),
        pytest.param(
            answer({"status": "success", "data": {"resultType": "matrix", "result": []}}),
            "expected an instant vector",
            id="matrix instead of vector",
        ),
        pytest.param(
            answer(
                {
                    "status": "success",
                    "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1]}]},
                }
            ),
            "malformed sample",
            id="short sample pair",
        ),
        pytest.param(
            answer(
                {
                    "status": "success",
                    "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "x"]}]},
                }
            ),
            "malformed sample",
            id="non-numeric value",
        ),
        pytest.param(
            answer({"status": "success", "data": {"resultType": "vector", "result": ["x"]}}),
            "malformed vector element",
            id="element not an object",
        ),
        pytest.param(
            answer(vector(("value", 1), ("value", 2), ("count", 2))),
            "returned 2 value series",
            id="several value series",
        ),
        pytest.param(
            answer(vector(("value", 42), ("count", 1), ("timestamp", NOW)), 500),
            "HTTP 500",
            id="a success body with HTTP 500 is not a value",
        ),
        pytest.param(
            answer(vector(("value", 42), ("count", 1), ("timestamp", NOW)), 404),
            "HTTP 404",
            id="a success body with HTTP 404 is not a value",
        ),
        pytest.param(
            answer(
                '{"status": "success", "data": {"resultType": "vector", "result": '
                '[{"metric": {"adapter_part": "value"}, "value": [NaN, "42"]}]}}'
            ),
            "evaluation time is not a number",
            id="NaN evaluation time",
        ),
    ],
)
async def test_garbage_is_unavailable(prom: StartProm, handler: Handler, cause: str) -> None:
    """Anything but a well-formed success answer is SourceUnavailable with the precise cause."""
    source, _ = await prom(handler)
    try:
        with pytest.raises(SourceUnavailable) as caught:
            await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()
    assert cause in str(caught.value)


async def test_slow_prometheus_times_out_within_bound(prom: StartProm) -> None:
    """A Prometheus slower than the timeout is an error after about the timeout, never a value."""

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(5)
        return await answer(vector(("value", 1), ("count", 1)))(request)

    source, seen = await prom(slow, timeout=0.3)
    started = time.monotonic()
    try:
        with pytest.raises(SourceUnavailable, match=r"timed out after 0\.3s"):
            await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()
    assert time.monotonic() - started < 1.5
    assert seen, "the request reached the server"


async def test_a_slow_body_times_out_within_bound(prom: StartProm) -> None:
    """The timeout covers reading the whole body, not only the headers: a body trickled slowly fails
    after about the timeout."""

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            for _ in range(50):
                await response.write(b" ")
                await asyncio.sleep(0.1)
        return response

    source, _ = await prom(trickle, timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(SourceUnavailable, match=r"timed out after 0\.5s"):
            await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()
    assert time.monotonic() - started < 1.5


async def test_a_body_past_the_limit_is_refused_without_reading_the_rest(prom: StartProm) -> None:
    """A 64 MiB answer with a 256 KiB limit: SourceUnavailable naming the limit, and the connection is
    dropped, so the server could not send (nor the adapter buffer) more than a few socket buffers."""
    sent: list[int] = []
    finished = asyncio.Event()

    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        chunk = b" " * 65536
        try:
            for _ in range(1024):
                await response.write(chunk)
                sent.append(len(chunk))
        except ConnectionError:
            pass
        finally:
            finished.set()
        return response

    source, _ = await prom(huge, max_body_bytes=256 * 1024)
    try:
        with pytest.raises(SourceUnavailable, match=r"exceeds prometheus\.max_body_bytes \(262144 bytes\)"):
            await source.fetch(WAITING, "prod", SEL)
        await asyncio.wait_for(finished.wait(), 10)
    finally:
        await source.close()
    assert sum(sent) < 16 * 1024 * 1024, f"the server sent {sum(sent)} bytes"


async def test_a_declared_length_past_the_limit_is_refused_before_reading(prom: StartProm) -> None:
    """A Content-Length over the limit is refused from the headers alone."""
    document = json.dumps(vector(("value", 1), ("count", 1))) + " " * 300_000
    with pytest.raises(
        SourceUnavailable, match=r"is \d+ bytes, more than prometheus\.max_body_bytes \(262144\)"
    ):
        await fetch_once(prom, document, max_body_bytes=256 * 1024)


async def test_unreachable_prometheus() -> None:
    """A refused connection is SourceUnavailable naming the URL in the log message."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    source = PrometheusSource(PrometheusSettings(url=f"http://127.0.0.1:{port}", timeout=1))
    try:
        with pytest.raises(SourceUnavailable, match=f"unable to query http://127.0.0.1:{port}/api/v1/query"):
            await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()
