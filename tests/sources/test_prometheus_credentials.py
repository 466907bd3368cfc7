"""How the Prometheus source reaches Prometheus: a bearer token re-read when its file changes, basic
authentication, extra headers, and HTTPS with its own CA and a client certificate.

The Prometheus HTTP API is faked (tests/sources/prometheus_fake.py, the `prom` fixture); the TLS
test serves it over real TLS with certificates made by tests/certs.py.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from adapter.config import BasicAuth, PrometheusSettings
from adapter.errors import SourceUnavailable
from adapter.sources.prometheus import PrometheusSource
from tests.certs import CA
from tests.sources.prometheus_fake import NOW, SEL, WAITING, StartProm, answer, vector


async def test_credentials_and_headers(prom: StartProm, tmp_path: Path) -> None:
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
        os.utime(token, (time.time() + 5, time.time() + 5))
        await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()
    assert seen[0].headers["Authorization"] == "Bearer first"
    assert seen[1].headers["Authorization"] == "Bearer second"
    assert seen[0].headers["X-Scope-OrgID"] == "team-a"

    basic, seen_basic = await prom(
        answer(vector(("value", 1), ("count", 1))), basic_auth=BasicAuth("adapter", str(password))
    )
    try:
        await basic.fetch(WAITING, "prod", SEL)
    finally:
        await basic.close()
    assert seen_basic[0].headers["Authorization"] == "Basic YWRhcHRlcjpzM2NyZXQ="


async def test_missing_token_file_is_unavailable(prom: StartProm, tmp_path: Path) -> None:
    """A credential file that cannot be read fails the query, naming the file in the cause."""
    source, _ = await prom(answer(vector()), bearer_token_file=str(tmp_path / "missing"))
    try:
        with pytest.raises(SourceUnavailable, match="unable to read credential file"):
            await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()


async def test_tls_with_custom_ca_and_client_certificate(tmp_path: Path) -> None:
    """HTTPS to Prometheus verifies its certificate against ca_file and presents cert_file/key_file."""
    ca = CA("prom-ca")
    ca_path = str(ca.write(tmp_path, "ca"))
    server_crt, server_key = (str(p) for p in ca.issue("prometheus", server=True).write(tmp_path, "server"))
    client_crt, client_key = (str(p) for p in ca.issue("adapter").write(tmp_path, "client"))

    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=ca_path)
    server_ctx.load_cert_chain(server_crt, server_key)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    peers: list[Any] = []  # the client certificate as the TLS layer decoded it, per request

    async def handler(request: web.Request) -> web.StreamResponse:
        peers.append(request.transport.get_extra_info("peercert") if request.transport else None)
        return await answer(vector(("value", 5), ("count", 1), ("timestamp", NOW)))(request)

    app = web.Application()
    app.router.add_post("/api/v1/query", handler)
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.SockSite(runner, listening, ssl_context=server_ctx).start()
        good = PrometheusSource(
            PrometheusSettings(
                url=f"https://localhost:{port}",
                ca_file=ca_path,
                cert_file=client_crt,
                key_file=client_key,
            )
        )
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
