"""The Prometheus source against a local HTTP server that answers like Prometheus (and like things that are not).

Real Prometheus is used in tests/integration (test_prometheus_source.py, test_prometheus_freshness.py);
here a small aiohttp server returns each response shape of the HTTP API (combined parts, empty, NaN,
error, garbage, huge or slow bodies) so every row can be forced.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.typedefs import Handler

from adapter import catalogue
from adapter.catalogue import MetricDef, PromQLSpec
from adapter.config import BasicAuth, PrometheusSettings
from adapter.errors import NoTargets, SourceUnavailable
from adapter.promql import PART_LABEL, REF_LABEL
from adapter.selectors import parse
from adapter.sources import Gap, Sample
from adapter.sources.prometheus import PrometheusSource
from adapter.sources.prometheus_answer import LOOKBACK_SECONDS
from tests.fakes import Clock

NOW = time.time()


def vector(*parts: tuple[str, float | str] | tuple[str, float | str, dict[str, str]]) -> dict[str, Any]:
    """A success answer whose series carry `adapter_part` (and any extra labels); timestamp parts are
    numbered in order, as `promql.combined_query` numbers its selectors."""
    result = []
    for index, (part, value, *extra) in enumerate(parts):
        labels = {PART_LABEL: part, **(extra[0] if extra else {})}
        if part == "timestamp":
            labels.setdefault(REF_LABEL, str(index))
        result.append({"metric": labels, "value": [NOW, str(value)]})
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


@pytest.fixture
def prom(
    aiohttp_server: Any,
) -> Callable[[Handler], Awaitable[tuple[PrometheusSource, list[dict[str, Any]]]]]:
    """Start a fake Prometheus HTTP API with the given handler; return a source pointed at it."""

    async def start(
        handler: Handler, clock: Any = None, **settings: Any
    ) -> tuple[PrometheusSource, list[dict[str, Any]]]:
        seen: list[dict[str, Any]] = []

        async def recording(request: web.Request) -> web.StreamResponse:
            form = await request.post()
            seen.append(
                {"query": form.get("query"), "time": form.get("time"), "headers": dict(request.headers)}
            )
            return await handler(request)

        app = web.Application()
        app.router.add_post("/api/v1/query", recording)
        server = await aiohttp_server(app)
        source = PrometheusSource(
            PrometheusSettings(url=f"http://127.0.0.1:{server.port}", **settings), clock=clock or time.time
        )
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


INFLIGHT = catalogue.builtin("vllm_requests_inflight")


async def fetch_once(prom: Any, document: Any, metric: MetricDef = WAITING, **settings: Any) -> Sample:
    source, _ = await prom(answer(document), **settings)
    try:
        return await source.fetch(metric, "prod", SEL)
    finally:
        await source.close()


async def test_value_count_and_oldest_raw_sample_time(prom: Any) -> None:
    """A combined answer yields value, target count, and the oldest of the raw selectors' sample times."""
    source, seen = await prom(
        answer(vector(("value", 12), ("count", 3), ("timestamp", NOW - 7), ("timestamp", NOW - 2)))
    )
    try:
        sample = await source.fetch(INFLIGHT, "prod", SEL)
    finally:
        await source.close()
    assert sample == Sample(12.0, pytest.approx(NOW - 7), 3, ())
    assert 'namespace="prod", model_name="llama"' in seen[0]["query"]
    for family in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
        assert f'min(timestamp({family}{{namespace="prod", model_name="llama"}}))' in seen[0]["query"]


@pytest.mark.parametrize(
    ("document", "check"),
    [
        pytest.param(
            vector(("count", 2), ("timestamp", NOW)), lambda v: v is None, id="targets without value"
        ),
        pytest.param(vector(("value", "NaN"), ("count", 2), ("timestamp", NOW)), math.isnan, id="NaN as is"),
        pytest.param(
            vector(("value", "+Inf"), ("count", 2), ("timestamp", NOW)),
            lambda v: v == math.inf,
            id="+Inf as is",
        ),
        pytest.param(
            vector(("value", "0.0005"), ("count", 1), ("timestamp", NOW)),
            lambda v: v == 0.0005,
            id="an unresolved quantile as is (the provider judges it)",
        ),
    ],
)
async def test_values_are_reported_raw(prom: Any, document: dict[str, Any], check: Any) -> None:
    """Healthy source and targets: the value is reported as computed; NaN/Inf/empty are the provider's to judge."""
    assert check((await fetch_once(prom, document, TTFT)).value)


@pytest.mark.parametrize(
    "stamps",
    [
        pytest.param(("NaN", NOW), id="NaN first"),
        pytest.param((NOW, "NaN"), id="NaN last"),
    ],
)
async def test_nan_sample_time_passes_through(prom: Any, stamps: tuple[Any, Any]) -> None:
    """A raw sample time that is NaN makes the sample time NaN wherever it is (the provider answers 503)."""
    document = vector(("value", 4), ("count", 1), *(("timestamp", stamp) for stamp in stamps))
    assert math.isnan((await fetch_once(prom, document, INFLIGHT)).timestamp)


async def test_gauge_gaps_name_family_and_target(prom: Any) -> None:
    """Absent and non-finite gauge families come back as gaps naming the family and the pod (or the
    scrape instance when the series carry no pod label)."""
    document = vector(
        ("value", 40),
        ("count", 3),
        ("timestamp", NOW),
        ("absent", 1, {REF_LABEL: "vllm:num_requests_waiting", "namespace": "prod", "pod": "b"}),
        ("nonfinite", "+Inf", {REF_LABEL: "vllm:num_requests_waiting", "namespace": "prod", "pod": "a"}),
        ("nonfinite", "NaN", {REF_LABEL: "vllm:num_requests_running", "instance": "10.0.0.5:8000"}),
    )
    sample = await fetch_once(prom, document, INFLIGHT)
    assert sample.value == 40.0
    assert sample.gaps == (
        Gap("vllm:num_requests_running", "10.0.0.5:8000", "nan"),
        Gap("vllm:num_requests_waiting", "prod/a", "inf"),
        Gap("vllm:num_requests_waiting", "prod/b", "absent"),
    )


async def test_queries_are_evaluated_at_the_refresh_interval(prom: Any) -> None:
    """The `time` parameter is now aligned down to the refresh interval, so replicas ask the same question."""
    clock = Clock()
    clock.now = 1_800_000_007.9
    source, seen = await prom(
        answer(vector(("value", 1), ("count", 1), ("timestamp", NOW))), clock=clock, refresh_interval=5.0
    )
    try:
        await source.fetch(WAITING, "prod", SEL)
        clock.now = 1_800_000_009.99
        await source.fetch(WAITING, "prod", SEL)
        clock.now = 1_800_000_010.0
        await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()
    assert [request["time"] for request in seen] == ["1800000005.000", "1800000005.000", "1800000010.000"]


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


async def test_a_slow_body_times_out_within_bound(prom: Any) -> None:
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


async def test_a_body_past_the_limit_is_refused_without_reading_the_rest(prom: Any) -> None:
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


async def test_a_declared_length_past_the_limit_is_refused_before_reading(prom: Any) -> None:
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


async def test_user_query_freshness_comes_from_its_raw_selectors(prom: Any) -> None:
    """A user query is dated by `timestamp()` of each vector selector the parser finds in it (without
    offset), with the request's matchers filled in; a scalar query is wrapped in `vector()`."""
    user = MetricDef(
        "queue_depth",
        "h",
        "",
        PromQLSpec(
            'scalar(sum(sqs{queue="a", <<.LabelMatchers>>}) / max(rate(x{<<.LabelMatchers>>}[5m] offset 1m)))'
        ),
        on_empty=None,
    )
    source, seen = await prom(answer(vector(("value", 4), ("timestamp", NOW - 30), ("timestamp", NOW - 3))))
    try:
        sample = await source.fetch(user, "prod", parse(""))
    finally:
        await source.close()
    assert sample == Sample(4.0, pytest.approx(NOW - 30), None, ())
    query = seen[0]["query"]
    assert query.startswith('label_replace(vector(scalar(sum(sqs{queue="a", namespace="prod"}) / max(rate(')
    assert 'min(timestamp(sqs{queue="a", namespace="prod"}))' in query
    assert 'min(timestamp(x{namespace="prod"}))' in query


async def test_value_without_any_recent_raw_sample_is_at_least_a_lookback_old(prom: Any) -> None:
    """A value whose raw selectors have no sample within Prometheus' lookback (e.g. `max_over_time` of
    a dead exporter) is dated a lookback before the evaluation time: a true lower bound, never "now"."""
    clock = Clock()
    clock.now = NOW
    user = MetricDef("q", "h", "", PromQLSpec("max_over_time(q{<<.LabelMatchers>>}[1h])"), on_empty=None)
    source, _ = await prom(answer(vector(("value", 9))), clock=clock, refresh_interval=1.0)
    try:
        sample = await source.fetch(user, "prod", parse(""))
    finally:
        await source.close()
    assert sample.value == 9.0
    assert sample.timestamp == math.floor(NOW) - LOOKBACK_SECONDS


async def test_constant_user_query_is_dated_by_its_evaluation(prom: Any) -> None:
    """A query without any selector (a constant) is as fresh as its evaluation; it has no count part."""
    clock = Clock()
    clock.now = NOW
    user = MetricDef("c", "h", "", PromQLSpec("vector(3)"), namespaced=False, on_empty=None)
    source, seen = await prom(answer(vector(("value", 3))), clock=clock, refresh_interval=1.0)
    try:
        sample = await source.fetch(user, None, parse(""))
    finally:
        await source.close()
    assert sample == Sample(3.0, math.floor(NOW), None, ())
    assert seen[0]["query"] == 'label_replace((vector(3)), "adapter_part", "value", "", "")'


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
