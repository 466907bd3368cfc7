"""The Prometheus source against a local HTTP server that answers like Prometheus (and like things that are not).

Real Prometheus is used in tests/integration; here a small aiohttp server returns each response
shape of the HTTP API (vector, scalar, empty, NaN, error, garbage) so every row can be forced.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from adapter import catalogue
from adapter.catalogue import MetricDef, PromQLSpec
from adapter.config import BasicAuth, PrometheusSettings
from adapter.errors import NoTargets, SourceUnavailable, Unresolved
from adapter.selectors import parse
from adapter.sources.prometheus import PrometheusSource

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
NOW = time.time()


def vector(*parts: tuple[str, float | str]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": {"adapter_part": p}, "value": [NOW, str(v)]} for p, v in parts],
        },
    }


@pytest.fixture
def prom(
    aiohttp_server: Any,
) -> Callable[[Handler], Awaitable[tuple[PrometheusSource, list[dict[str, Any]]]]]:
    """Start a fake Prometheus HTTP API with the given handler; return a source pointed at it."""

    async def start(handler: Handler, **settings: Any) -> tuple[PrometheusSource, list[dict[str, Any]]]:
        seen: list[dict[str, Any]] = []

        async def recording(request: web.Request) -> web.StreamResponse:
            form = await request.post()
            seen.append({"query": form.get("query"), "headers": dict(request.headers)})
            return await handler(request)

        app = web.Application()
        app.router.add_post("/api/v1/query", recording)
        server = await aiohttp_server(app)
        source = PrometheusSource(PrometheusSettings(url=f"http://127.0.0.1:{server.port}", **settings))
        await source.start()
        return source, seen

    return start


def answer(document: Any, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        text = document if isinstance(document, str) else json.dumps(document)
        return web.Response(text=text, status=status, content_type="application/json")

    return handler


WAITING = catalogue.builtin("vllm_requests_waiting")
TTFT = catalogue.builtin("vllm_ttft_seconds")
SEL = parse("model_name=llama")


async def test_value_count_and_timestamp(prom: Any) -> None:
    """A combined answer yields value, target count, and the oldest sample time as timestamp."""
    source, seen = await prom(answer(vector(("value", 12), ("count", 3), ("timestamp", NOW - 7))))
    try:
        sample = await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()
    assert sample.value == 12.0 and sample.targets == 3
    assert sample.timestamp == pytest.approx(NOW - 7)
    assert 'namespace="prod", model_name="llama"' in seen[0]["query"]


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(vector(("count", 2), ("timestamp", NOW)), None, id="targets without value is empty"),
        pytest.param(vector(("value", "NaN"), ("count", 2), ("timestamp", NOW)), None, id="NaN is empty"),
        pytest.param(vector(("value", "+Inf"), ("count", 2), ("timestamp", NOW)), None, id="Inf is empty"),
    ],
)
async def test_empty_values(prom: Any, document: dict[str, Any], expected: float | None) -> None:
    """Healthy source and targets, but no usable value: the sample is empty (the provider decides)."""
    source, _ = await prom(answer(document))
    try:
        assert (await source.fetch(WAITING, "prod", SEL)).value is expected
    finally:
        await source.close()


async def test_no_targets(prom: Any) -> None:
    """An empty vector means no series matched at all: NoTargets, not zero."""
    source, _ = await prom(answer(vector()))
    try:
        with pytest.raises(NoTargets):
            await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()


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
    ],
)
async def test_garbage_is_unavailable(prom: Any, handler: Handler, cause: str) -> None:
    """Anything but a well-formed success answer is SourceUnavailable with the precise cause."""
    source, _ = await prom(handler)
    try:
        with pytest.raises(SourceUnavailable) as caught:
            await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()
    assert cause in str(caught.value)


async def test_slow_prometheus_times_out_within_bound(prom: Any) -> None:
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


@pytest.mark.parametrize(
    ("value", "error"),
    [
        pytest.param(0.0008, Unresolved, id="quantile inside the first bucket is unresolved"),
        pytest.param(2560.0, Unresolved, id="quantile at the last finite bucket is unresolved"),
        pytest.param(0.35, None, id="quantile between buckets is a value"),
    ],
)
async def test_quantile_resolution(prom: Any, value: float, error: type[Exception] | None) -> None:
    """A histogram quantile is a measurement only where the buckets resolve it."""
    source, _ = await prom(answer(vector(("value", value), ("count", 1), ("timestamp", NOW))))
    try:
        if error is None:
            assert (await source.fetch(TTFT, "prod", SEL)).value == value
        else:
            with pytest.raises(error):
                await source.fetch(TTFT, "prod", SEL)
    finally:
        await source.close()


async def test_user_query_scalar_and_single_vector(prom: Any) -> None:
    """A user query without presence may answer a scalar or one series; the namespace is optional."""
    user = MetricDef(
        "dlq_depth", "h", "", PromQLSpec("max(sqs{<<.LabelMatchers>>})"), namespaced=False, on_empty=None
    )
    source, seen = await prom(
        answer({"status": "success", "data": {"resultType": "scalar", "result": [NOW, "4"]}})
    )
    try:
        sample = await source.fetch(user, None, parse(""))
    finally:
        await source.close()
    assert sample.value == 4.0
    assert seen[0]["query"] == "max(sqs{})"


async def test_credentials_and_headers(prom: Any, tmp_path: Path) -> None:
    """Bearer token (re-read when the file changes), basic auth and extra headers reach Prometheus."""
    token = tmp_path / "token"
    token.write_text("first\n")
    password = tmp_path / "password"
    password.write_text("s3cret")
    source, seen = await prom(
        answer(vector(("value", 1), ("count", 1), ("timestamp", NOW))),
        bearer_token_file=str(token),
        headers={"X-Scope-OrgID": "team-a"},
    )
    try:
        await source.fetch(WAITING, "prod", SEL)
        token.write_text("second")
        import os

        os.utime(token, (time.time() + 5, time.time() + 5))
        await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()
    assert seen[0]["headers"]["Authorization"] == "Bearer first"
    assert seen[1]["headers"]["Authorization"] == "Bearer second"
    assert seen[0]["headers"]["X-Scope-OrgID"] == "team-a"

    basic, seen_basic = await prom(
        answer(vector(("value", 1), ("count", 1))), basic_auth=BasicAuth("adapter", str(password))
    )
    try:
        await basic.fetch(WAITING, "prod", SEL)
    finally:
        await basic.close()
    assert seen_basic[0]["headers"]["Authorization"] == "Basic YWRhcHRlcjpzM2NyZXQ="


async def test_missing_token_file_is_unavailable(prom: Any, tmp_path: Path) -> None:
    """A credential file that cannot be read fails the query, naming the file in the cause."""
    source, _ = await prom(answer(vector()), bearer_token_file=str(tmp_path / "missing"))
    try:
        with pytest.raises(SourceUnavailable, match="unable to read credential file"):
            await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()


async def test_tls_with_custom_ca_and_client_certificate(tmp_path: Path) -> None:
    """HTTPS to Prometheus verifies its certificate against ca_file and presents cert_file/key_file."""
    from tests.certs import CA

    ca = CA("prom-ca")
    ca_path = str(ca.write(tmp_path, "ca"))
    server_crt, server_key = (str(p) for p in ca.issue("prometheus", server=True).write(tmp_path, "server"))
    client_crt, client_key = (str(p) for p in ca.issue("adapter").write(tmp_path, "client"))

    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=ca_path)
    server_ctx.load_cert_chain(server_crt, server_key)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    peers: list[Any] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        peers.append(request.transport.get_extra_info("peercert") if request.transport else None)
        return await answer(vector(("value", 5), ("count", 1), ("timestamp", NOW)))(request)

    app = web.Application()
    app.router.add_post("/api/v1/query", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        good = PrometheusSource(
            PrometheusSettings(
                url=f"https://localhost:{port}", ca_file=ca_path, cert_file=client_crt, key_file=client_key,
            )
        )  # fmt: skip
        try:
            assert (await good.fetch(WAITING, "prod", SEL)).value == 5.0
        finally:
            await good.close()
        assert peers and dict(x[0] for x in peers[0]["subject"])["commonName"] == "adapter"

        untrusted = PrometheusSource(PrometheusSettings(url=f"https://localhost:{port}"))
        try:
            with pytest.raises(SourceUnavailable, match="unable to query"):
                await untrusted.fetch(WAITING, "prod", SEL)
        finally:
            await untrusted.close()
    finally:
        await runner.cleanup()
