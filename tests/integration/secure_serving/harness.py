"""The real adapter over real TLS, started in-process, and the cluster around it, for the secure
serving tests.

`Cluster` holds a cluster's PKI (certificates made with `cryptography` by tests/certs.py) and
`tests.kubeapi_fake.FakeKubeAPI`, a stand-in for the kube-apiserver (which cannot run here) that
answers TokenReview, SubjectAccessReview and the extension-apiserver-authentication ConfigMap through
the official `kubernetes` client. The fixtures that start them are in conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from cryptography import x509

from tests.certs import CA, Issued
from tests.kubeapi_fake import FakeKubeAPI
from tests.waiting import eventually

METRIC = "vllm_requests_waiting"
BASE = "/apis/external.metrics.k8s.io/v1beta1"
HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
# Generous for a loaded CI machine; every wait polls and returns as soon as it can.
DEADLINE_SECONDS = 10.0


def metric_path(namespace: str = "a", metric: str = METRIC) -> str:
    """The external metrics API path of `metric` in `namespace`."""
    return f"{BASE}/namespaces/{namespace}/{metric}"


def front_proxy_headers(user: str, *groups: str) -> dict[str, str]:
    """The headers a front proxy sends for `user` (and its first group)."""
    return {"X-Remote-User": user, **({"X-Remote-Group": groups[0]} if groups else {})}


async def close(writer: asyncio.StreamWriter) -> None:
    """Close a raw TLS connection."""
    writer.close()
    # A TLS peer may cut the connection instead of answering close_notify; closed is closed.
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()


@dataclass
class Cluster:
    """The PKI of a cluster, and the fake kube-apiserver that knows its users and their grants."""

    directory: Path
    kube: FakeKubeAPI
    kubeconfig: Path
    serving_ca: CA = field(default_factory=lambda: CA("serving-ca"))
    client_ca: CA = field(default_factory=lambda: CA("kubernetes"))
    front_proxy_ca: CA = field(default_factory=lambda: CA("front-proxy-ca"))
    other_ca: CA = field(default_factory=lambda: CA("somebody-else"))

    def __post_init__(self) -> None:
        self.front_proxy = self.front_proxy_ca.issue("front-proxy-client")
        self.serving = self.serving_ca.issue("vllm-autoscale", server=True)

    def files(self) -> dict[str, Path]:
        cert, key = self.serving.write(self.directory, "serving")
        return {
            "cert": cert,
            "key": key,
            "client_ca": self.client_ca.write(self.directory, "client-ca"),
            "front_proxy_ca": self.front_proxy_ca.write(self.directory, "front-proxy-ca"),
        }


@dataclass
class Adapter:
    """A running adapter and a client for it."""

    port: int
    trust: CA

    async def get(
        self,
        path: str,
        *,
        cert: Issued | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """GET `path` with an optional client certificate; `(status, body)` (JSON when it is JSON)."""
        context = cert.client_context(self.trust) if cert else self.trust.client_context()
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
            session.get(f"https://127.0.0.1:{self.port}{path}", headers=headers) as response,
        ):
            body = (
                await response.json()
                if response.content_type == "application/json"
                else await response.text()
            )
            return response.status, body


StartAdapter = Callable[..., Awaitable[Adapter]]


async def served_serial(port: int, trust: CA) -> int:
    """The serial number of the certificate a new TLS connection to `port` is served."""
    _reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=trust.client_context(), server_hostname="localhost"
    )
    try:
        return x509.load_der_x509_certificate(
            writer.get_extra_info("ssl_object").getpeercert(True)
        ).serial_number
    finally:
        await close(writer)


async def rotate_serving_certificate(cluster: Cluster, port: int) -> None:
    """Replace the serving pair as cert-manager would (each file atomically) and wait until new
    connections get the new certificate."""
    rotated = cluster.serving_ca.issue("vllm-autoscale-rotated", server=True)
    rotated.write(cluster.directory, "serving.next")
    os.replace(cluster.directory / "serving.next.key", cluster.directory / "serving.key")
    os.replace(cluster.directory / "serving.next.crt", cluster.directory / "serving.crt")

    async def rotated_is_served() -> bool:
        return await served_serial(port, cluster.serving_ca) == rotated.serial

    await eventually(
        rotated_is_served, DEADLINE_SECONDS, "the rotated certificate to be served", interval=0.05
    )


async def answers(adapter: Adapter, path: str, expected: int, **kwargs: Any) -> None:
    """GET `path` until the answer is `expected` (0: refused in the TLS handshake); fail after the
    deadline naming the last answer."""

    async def check() -> bool:
        try:
            status, _ = await adapter.get(path, **kwargs)
        except aiohttp.ClientError:
            status = 0  # refused in the handshake: the CA is not (yet) trusted
        if status != expected:
            raise AssertionError(f"answered {status}")
        return True

    await eventually(check, DEADLINE_SECONDS, f"GET {path} to answer {expected}", interval=0.05)
