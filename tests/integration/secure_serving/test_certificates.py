"""Secure serving's certificates: a self-signed one when asked, and rotations of the serving pair and
of the client CA picked up without a restart, open connections kept.

Certificates are made with `cryptography` (tests/certs.py) and replaced on disk as cert-manager
would; the adapter runs in-process (tests/integration/secure_serving/harness.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl

import aiohttp
import pytest
from cryptography import x509

from tests.certs import CA
from tests.integration.secure_serving.harness import (
    DEADLINE_SECONDS,
    HPA_USER,
    Cluster,
    StartAdapter,
    answers,
    close,
    metric_path,
    rotate_serving_certificate,
)
from tests.kubeapi_fake import FakeKubeAPI


async def test_self_signed_certificate_is_served_and_logged_as_such(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    """`--self-signed` serves an in-memory certificate that no CA vouches for, and says so in the log."""
    caplog.set_level(logging.INFO, logger="adapter")
    files = cluster.files()
    adapter = await start_adapter(
        "--self-signed",
        "--client-ca-file",
        str(files["client_ca"]),
        "--requestheader-client-ca-file",
        str(files["front_proxy_ca"]),
        defaults=False,
    )
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await adapter.get("/healthz")
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    _reader, writer = await asyncio.open_connection("127.0.0.1", adapter.port, ssl=insecure)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        await close(writer)
    served = x509.load_der_x509_certificate(der)
    assert served.issuer == served.subject
    assert any("self-signed" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


async def _keep_alive_get(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str, user: str
) -> int:
    """One HTTP/1.1 request on an open connection, which stays open; the status code."""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nX-Remote-User: {user}\r\n\r\n".encode())
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), DEADLINE_SECONDS)).decode()
    length = next(
        int(line.split(":")[1]) for line in head.split("\r\n") if line.lower().startswith("content-length")
    )
    await reader.readexactly(length)
    return int(head.split()[1])


async def test_certificate_rotation_serves_new_connections_and_keeps_open_ones(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI
) -> None:
    """Replacing the files mid-run: new handshakes get the new
    certificate; an open keep-alive connection keeps working."""
    adapter = await start_adapter(config_text="security:\n  tls_reload_interval: 50ms\n")
    old_serial = cluster.serving.serial
    reader, writer = await asyncio.open_connection(
        "127.0.0.1",
        adapter.port,
        ssl=cluster.front_proxy.client_context(cluster.serving_ca),
        server_hostname="localhost",
    )
    try:
        assert await _keep_alive_get(reader, writer, metric_path(), HPA_USER) == 200
        await rotate_serving_certificate(cluster, adapter.port)

        assert await _keep_alive_get(reader, writer, metric_path(), HPA_USER) == 200
        still = x509.load_der_x509_certificate(writer.get_extra_info("ssl_object").getpeercert(True))
        assert still.serial_number == old_serial
    finally:
        await close(writer)


async def test_client_ca_file_rotation_is_picked_up(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI
) -> None:
    """Replacing --client-ca-file mid-run makes the new
    CA's certificates work, in TLS and in authentication."""
    adapter = await start_adapter(config_text="security:\n  tls_reload_interval: 50ms\n")
    rotated = CA("kubernetes-2")
    alice = rotated.issue("alice")
    await answers(adapter, metric_path("a"), 0, cert=alice)
    (cluster.directory / "client-ca.next").write_bytes(rotated.cert_pem + cluster.client_ca.cert_pem)
    os.replace(cluster.directory / "client-ca.next", cluster.directory / "client-ca.crt")
    await answers(adapter, metric_path("a"), 200, cert=alice)
