"""Secure serving end to end: the real adapter over real TLS, as the aggregator, the HPA and strangers reach it.

Every test starts the adapter in-process through `server.serve_config` (flags parsed by the real
parser) on a free port, with certificates the tests make with `cryptography` and a `FakeSource`.
TokenReview, SubjectAccessReview and the extension-apiserver-authentication ConfigMap are
answered by `tests.kubeapi_fake.FakeKubeAPI`, a stand-in for the kube-apiserver (which cannot run
here), reached through the official `kubernetes` client.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from adapter import cli, server
from adapter.config import load_file
from adapter.errors import ConfigError
from tests.certs import CA, Issued
from tests.fakes import FakeSource
from tests.kubeapi_fake import FakeKubeAPI, Grant

METRIC = "vllm_requests_waiting"
BASE = "/apis/external.metrics.k8s.io/v1beta1"
HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
# Generous for a loaded CI machine; every wait below polls and returns as soon as it can.
DEADLINE_SECONDS = 10.0


def metric_path(namespace: str = "a", metric: str = METRIC) -> str:
    return f"{BASE}/namespaces/{namespace}/{metric}"


async def _close(writer: asyncio.StreamWriter) -> None:
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


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    kube = FakeKubeAPI(CA("kube-apiserver-ca"))
    kubeconfig = await kube.start(tmp_path)
    try:
        yield Cluster(tmp_path, kube, kubeconfig)
    finally:
        await kube.stop()


@pytest.fixture
async def start_adapter(cluster: Cluster) -> AsyncIterator[StartAdapter]:
    """Start adapters with `serve` flags; each is stopped (and its task awaited) in teardown."""
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(*flags: str, config_text: str = "", defaults: bool = True) -> Adapter:
        files = cluster.files()
        argv = ["serve", "--address", "127.0.0.1", "--kubeconfig", str(cluster.kubeconfig)]
        if defaults:
            argv += ["--tls-cert-file", str(files["cert"]), "--tls-private-key-file", str(files["key"]),
                     "--client-ca-file", str(files["client_ca"]),
                     "--requestheader-client-ca-file", str(files["front_proxy_ca"]),
                     "--requestheader-allowed-names", "front-proxy-client"]  # fmt: skip
        if config_text:
            config_file = cluster.directory / "config.yaml"
            config_file.write_text(config_text)
            argv += ["--config", str(config_file)]
        args = cli.build_parser().parse_args([*argv, *flags])
        config = load_file(args.config, cli.serve_overrides(args))
        # Port 0 (a free port, never a fixed one) is for tests only, so the config file cannot say it.
        config = dataclasses.replace(config, server=dataclasses.replace(config.server, port=0))
        stop = asyncio.Event()
        bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            server.serve_config(config, stop, source=FakeSource(), on_bound=bound.set_result)
        )
        running.append((stop, task))
        waiting: set[asyncio.Future[Any]] = {bound, task}
        await asyncio.wait(waiting, timeout=DEADLINE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # raises the start-up error
        return Adapter(bound.result(), cluster.serving_ca)

    yield start
    for stop, task in running:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, DEADLINE_SECONDS)


@pytest.fixture
def grants(cluster: Cluster) -> FakeKubeAPI:
    """The cluster's users: the HPA everywhere, alice and bob in namespace `a` only."""
    kube = cluster.kube
    kube.tokens["bob-token"] = {"username": "bob", "groups": ["system:authenticated"]}
    kube.grants += [
        Grant(HPA_USER, verbs=("get", "list"), resources=("*",)),
        Grant("alice", resources=(METRIC,), namespaces=("a",)),
        Grant("bob", resources=(METRIC,), namespaces=("a",)),
    ]
    return kube


def _front_proxy_headers(user: str, *groups: str) -> dict[str, str]:
    return {"X-Remote-User": user, **({"X-Remote-Group": groups[0]} if groups else {})}


@pytest.mark.parametrize(
    ("cert", "headers", "path", "expected", "reviewed_user"),
    [
        pytest.param(None, {}, metric_path(), 401, None, id="no client certificate and no token is 401"),
        pytest.param("front-proxy", _front_proxy_headers(HPA_USER, "system:serviceaccounts"), metric_path(), 200,
                     HPA_USER, id="allowed front proxy naming an authorized user is 200"),
        pytest.param("front-proxy", _front_proxy_headers("carol"), metric_path(), 403, "carol",
                     id="allowed front proxy naming a user the SAR denies is 403"),
        pytest.param("front-proxy-disallowed-cn", _front_proxy_headers(HPA_USER), metric_path(), 401, None,
                     id="requestheader certificate with a CN not in allowed names is 401"),
        pytest.param("front-proxy", {}, metric_path(), 401, None,
                     id="front proxy without a user header is 401"),
        pytest.param("mallory", _front_proxy_headers(HPA_USER), metric_path(), 403, "mallory",
                     id="X-Remote-User over a client-ca certificate is ignored: the cert's CN is the user"),
        pytest.param("alice", {}, metric_path("a"), 200, "alice", id="client certificate CN allowed in a is 200"),
        pytest.param("alice", {}, metric_path("b"), 403, "alice",
                     id="namespace isolation: user allowed in a cannot read b"),
        pytest.param(None, {"Authorization": "Bearer bob-token"}, metric_path("a"), 200, "bob",
                     id="valid bearer token is 200"),
        pytest.param(None, {"Authorization": "Bearer bob-token"}, metric_path("b"), 403, "bob",
                     id="valid bearer token in a namespace without a grant is 403"),
        pytest.param(None, {"Authorization": "Bearer forged"}, metric_path(), 401, None,
                     id="invalid bearer token is 401"),
        pytest.param(None, {"Authorization": "Bearer bob-token", **_front_proxy_headers(HPA_USER, "system:masters")},
                     metric_path("b"), 403, "bob", id="X-Remote-User beside a bearer token is ignored: the token's user"),
        pytest.param(None, _front_proxy_headers(HPA_USER, "system:masters"), metric_path(), 401, None,
                     id="X-Remote-User without any certificate is 401"),
        pytest.param("front-proxy", _front_proxy_headers(HPA_USER), BASE, 200, HPA_USER,
                     id="discovery is list on the group"),
        pytest.param("alice", {}, BASE, 403, "alice", id="discovery without list on the group is 403"),
    ],
)  # fmt: skip
async def test_authentication_and_authorization_matrix(
    start_adapter: StartAdapter,
    cluster: Cluster,
    grants: FakeKubeAPI,
    cert: str | None,
    headers: dict[str, str],
    path: str,
    expected: int,
    reviewed_user: str | None,
) -> None:
    """Only a verified identity reaches the SubjectAccessReview, and its decision is the answer."""
    certificates = {
        "front-proxy": cluster.front_proxy,
        "front-proxy-disallowed-cn": cluster.front_proxy_ca.issue("intruder"),
        "mallory": cluster.client_ca.issue("mallory", ("team-m",)),
        "alice": cluster.client_ca.issue("alice", ("team-a",)),
    }
    adapter = await start_adapter()
    status, body = await adapter.get(path, cert=certificates[cert] if cert else None, headers=headers)
    assert status == expected, body
    assert grants.subjects_reviewed()[-1:] == ([reviewed_user] if reviewed_user else [])
    if expected == 200 and path != BASE:
        assert body["kind"] == "ExternalMetricValueList"
    if expected in (401, 403):
        assert body["kind"] == "Status"
        assert body["code"] == expected
        assert body["reason"] == ("Unauthorized" if expected == 401 else "Forbidden")


@pytest.mark.parametrize(
    "which",
    [
        pytest.param(
            "other-ca", id="certificate from a CA the adapter does not trust is refused in the handshake"
        ),
        pytest.param("expired", id="expired client certificate is refused in the handshake"),
        pytest.param("not-yet-valid", id="client certificate not valid yet is refused in the handshake"),
        pytest.param("expired-front-proxy", id="expired front-proxy certificate is refused in the handshake"),
    ],
)
async def test_untrusted_client_certificates_get_no_answer(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI, which: str
) -> None:
    """A presented certificate that does not verify ends the connection before any HTTP is served."""
    cert = {
        "other-ca": lambda: cluster.other_ca.issue("alice"),
        "expired": lambda: cluster.client_ca.issue("alice", expired=True),
        "not-yet-valid": lambda: cluster.client_ca.issue("alice", not_yet_valid=True),
        "expired-front-proxy": lambda: cluster.front_proxy_ca.issue("front-proxy-client", expired=True),
    }[which]()
    adapter = await start_adapter()
    with pytest.raises(aiohttp.ClientError):
        await adapter.get(metric_path("a"), cert=cert, headers=_front_proxy_headers(HPA_USER))
    assert grants.access_reviews == []


async def test_sar_decisions_are_cached(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI
) -> None:
    """The HPA's repeated polls cost one SubjectAccessReview per user, metric and namespace within the TTL."""
    adapter = await start_adapter()
    headers = _front_proxy_headers(HPA_USER)
    for _ in range(3):
        status, _body = await adapter.get(metric_path(), cert=cluster.front_proxy, headers=headers)
        assert status == 200
    assert grants.subjects_reviewed() == [HPA_USER]


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
async def test_health_paths_need_no_credentials(
    start_adapter: StartAdapter, grants: FakeKubeAPI, path: str
) -> None:
    """Probes come from the kubelet without credentials: the always-allow paths skip authn and authz."""
    adapter = await start_adapter()
    deadline = time.monotonic() + DEADLINE_SECONDS
    status, _ = await adapter.get(path)
    # /readyz turns 200 once the source has answered its first ping.
    while status != 200 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        status, _ = await adapter.get(path)
    assert status == 200
    assert grants.access_reviews == []


PROMETHEUS_USER = "system:serviceaccount:monitoring:prometheus"


@pytest.mark.parametrize(
    ("flags", "token", "grant", "expected"),
    [
        pytest.param((), None, None, 401, id="metrics without credentials is 401 by default"),
        pytest.param((), "prometheus-token", None, 403, id="metrics without a nonResourceURL grant is 403"),
        pytest.param((), "prometheus-token", Grant(PROMETHEUS_USER, paths=("/metrics",)), 200,
                     id="metrics with get on the /metrics nonResourceURL is 200"),
        pytest.param((), "prometheus-token", Grant("system:serviceaccounts", paths=("/metrics",)), 200,
                     id="a grant to the token's group counts"),
        pytest.param((), "prometheus-token", Grant(PROMETHEUS_USER, verbs=("list",), paths=("/metrics",)), 403,
                     id="a grant of another verb on /metrics is 403"),
        pytest.param((), "prometheus-token", Grant(PROMETHEUS_USER, verbs=("get",), resources=("*",)), 403,
                     id="a grant on external metrics is not a grant on /metrics"),
        pytest.param(("--no-authorize-metrics",), None, None, 200,
                     id="metrics open to anyone with --no-authorize-metrics"),
    ],
)  # fmt: skip
async def test_metrics_authorization(
    start_adapter: StartAdapter,
    grants: FakeKubeAPI,
    flags: tuple[str, ...],
    token: str | None,
    grant: Grant | None,
    expected: int,
) -> None:
    """`/metrics` is authorized as the chart's Prometheus scrape asks: its service-account token, then a
    SubjectAccessReview for verb `get` on the non-resource URL `/metrics`, unless switched off."""
    grants.tokens["prometheus-token"] = {"username": PROMETHEUS_USER, "uid": "p-1",
                                         "groups": ["system:serviceaccounts", "system:authenticated"]}  # fmt: skip
    if grant is not None:
        grants.grants.append(grant)
    adapter = await start_adapter(*flags)
    status, body = await adapter.get(
        "/metrics", headers={"Authorization": f"Bearer {token}"} if token else None
    )
    assert status == expected, body
    if expected == 200:
        assert "# TYPE" in body
    else:
        assert body["kind"] == "Status"
    if token is not None:
        assert [review["token"] for review in (r["spec"] for r in grants.token_reviews)] == [token]
        assert grants.access_reviews == [
            {
                "user": PROMETHEUS_USER,
                "uid": "p-1",
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            }
        ]
    else:
        assert grants.access_reviews == []


@pytest.mark.parametrize(
    ("raw", "expected", "reviewed_namespaces"),
    [
        pytest.param(f"/healthz/..{metric_path('b')}", "404", [],
                     id="dot-dot after an always-allowed prefix reaches no metric"),
        pytest.param(f"/healthz/%2e%2e{metric_path('b')}", "404", [],
                     id="encoded dot-dot after an always-allowed prefix reaches no metric"),
        pytest.param(f"{BASE}/namespaces/a%2Fb/{METRIC}", "403", ["a/b"],
                     id="an encoded slash is authorized as the namespace the handler would read"),
        pytest.param(f"{BASE}/namespaces/b/{METRIC}?namespace=a", "403", ["b"],
                     id="a query string cannot change the namespace"),
        pytest.param(f"{BASE}/namespaces/a/../b/{METRIC}", "403", [],
                     id="dot segments from an allowed namespace are not the metric"),
        pytest.param(f"{BASE}/namespaces/b/{METRIC}/", "403", [],
                     id="a trailing slash is not the metric"),
        pytest.param(f"/{BASE}/namespaces/b/{METRIC}", "403", [],
                     id="a doubled leading slash is not the metric"),
        pytest.param(f"/%61pis/external.metrics.k8s.io/v1beta1/namespaces/b/{METRIC}", "403", ["b"],
                     id="a percent-encoded spelling is authorized as the metric it reaches"),
    ],
)  # fmt: skip
async def test_path_tricks_never_serve_another_namespace(
    start_adapter: StartAdapter,
    cluster: Cluster,
    grants: FakeKubeAPI,
    raw: str,
    expected: str,
    reviewed_namespaces: list[str],
) -> None:
    """A user allowed only in `a` cannot read elsewhere by dressing up the path (sent raw, unnormalized).

    Paths no route serves are reviewed as non-resource URLs, which alice has no grant for.
    """
    adapter = await start_adapter("--authorization-always-allow-paths", "/healthz,/healthz/*")
    alice = cluster.client_ca.issue("alice")
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", adapter.port, ssl=alice.client_context(cluster.serving_ca), server_hostname="localhost"
    )
    try:
        writer.write(f"GET {raw} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        status_line = (await asyncio.wait_for(reader.readline(), DEADLINE_SECONDS)).decode()
    finally:
        await _close(writer)
    assert status_line.split()[1] == expected, status_line
    resource_reviews = [r for r in grants.access_reviews if "resourceAttributes" in r]
    assert [r["resourceAttributes"]["namespace"] for r in resource_reviews] == reviewed_namespaces


@pytest.mark.parametrize(
    ("credentials", "call"),
    [
        pytest.param("front-proxy", "subjectaccessreview", id="subject access review fails"),
        pytest.param("token", "tokenreview", id="token review fails"),
    ],
)
async def test_kube_apiserver_failure_is_503_never_an_allow(
    start_adapter: StartAdapter,
    cluster: Cluster,
    grants: FakeKubeAPI,
    caplog: pytest.LogCaptureFixture,
    credentials: str,
    call: str,
) -> None:
    """When a review cannot be made the answer is a generic 503 Status: not the metric, not a 401; the log says why."""
    adapter = await start_adapter()
    grants.failing = True
    if credentials == "front-proxy":
        status, body = await adapter.get(
            metric_path(), cert=cluster.front_proxy, headers=_front_proxy_headers(HPA_USER)
        )
    else:
        status, body = await adapter.get(metric_path(), headers={"Authorization": "Bearer bob-token"})
    assert (status, body["kind"], body["reason"], body["code"]) == (503, "Status", "ServiceUnavailable", 503)
    assert (
        "etcdserver" not in body["message"]
        and "500" not in body["message"]
        and "127.0.0.1" not in body["message"]
    )
    assert any(f"unable to create {call}: HTTP 500" in r.getMessage() for r in caplog.records)


async def test_a_hanging_kube_apiserver_cannot_hang_requests(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI
) -> None:
    """With every review stalled, many concurrent requests (more than the client's worker threads) each get a
    503 Status within about the review timeout, and the probes keep answering."""
    adapter = await start_adapter(config_text="security:\n  review_timeout: 500ms\n")
    grants.stalled = True
    started = time.monotonic()
    # Distinct users: no two requests share one review, so 48 reviews hang at once, far more than the
    # client has worker threads: the deadline must count the wait for a worker, or they queue in waves.
    answers = await asyncio.gather(*(
        adapter.get(metric_path(), cert=cluster.front_proxy, headers=_front_proxy_headers(f"user-{i}"))
        for i in range(48)
    ))  # fmt: skip
    elapsed = time.monotonic() - started
    assert [(status, body["reason"]) for status, body in answers] == [(503, "ServiceUnavailable")] * 48
    # The review timeout (0.5 s) plus 48 TLS handshakes; waves of stuck workers would take 4 s or more.
    assert elapsed < 2.5, elapsed
    assert grants.stalled_calls >= 1
    assert (await adapter.get("/healthz"))[0] == 200


async def test_decisions_are_logged_at_debug_with_user_verb_resource_and_namespace(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    """Every authorization decision leaves a debug line naming who did what where."""
    caplog.set_level(logging.DEBUG, logger="adapter.security.access")
    adapter = await start_adapter()
    cert = cluster.client_ca.issue("alice")
    assert (await adapter.get(metric_path("b"), cert=cert))[0] == 403
    assert (await adapter.get(metric_path("a"), cert=cert))[0] == 200
    assert (await adapter.get(metric_path("a")))[0] == 401

    def logged(message: str) -> list[tuple[str, str, str, str]]:
        return [
            (vars(r)["user"], vars(r)["verb"], vars(r)["resource"], vars(r)["namespace"])
            for r in caplog.records
            if r.name == "adapter.security.access"
            and r.levelno == logging.DEBUG
            and r.getMessage().startswith(message)
        ]

    resource = f"{METRIC}.external.metrics.k8s.io"
    assert logged("request forbidden") == [("alice", "get", resource, "b")]
    assert logged("request allowed") == [("alice", "get", resource, "a")]
    assert logged("request not authenticated") == [("", "get", resource, "a")]


async def test_front_proxy_settings_come_from_the_cluster_configmap(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI
) -> None:
    """Without CA flags, the CAs, allowed names and header names are read from extension-apiserver-authentication."""
    cluster.kube.config_map = {
        "client-ca-file": cluster.client_ca.cert_pem.decode(),
        "requestheader-client-ca-file": cluster.front_proxy_ca.cert_pem.decode(),
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Proxy-User"]',
        "requestheader-group-headers": '["X-Proxy-Group"]',
        "requestheader-extra-headers-prefix": '["X-Proxy-Extra-"]',
    }
    files = cluster.files()
    adapter = await start_adapter(
        "--tls-cert-file", str(files["cert"]), "--tls-private-key-file", str(files["key"]), defaults=False
    )
    status, _ = await adapter.get(metric_path(), cert=cluster.front_proxy, headers={"X-Proxy-User": HPA_USER})
    assert status == 200
    status, _ = await adapter.get(
        metric_path(), cert=cluster.front_proxy_ca.issue("intruder"), headers={"X-Proxy-User": HPA_USER}
    )
    assert status == 401
    status, _ = await adapter.get(metric_path("a"), cert=cluster.client_ca.issue("alice"))
    assert status == 200
    assert cluster.kube.config_map_reads == 1


async def test_missing_configmap_stops_start_up_with_a_clear_error(
    start_adapter: StartAdapter, cluster: Cluster
) -> None:
    """Without CA flags and without the ConfigMap the adapter refuses to start and says what it needs."""
    files = cluster.files()
    with pytest.raises(Exception, match="extension-apiserver-authentication") as raised:
        await start_adapter(
            "--tls-cert-file", str(files["cert"]), "--tls-private-key-file", str(files["key"]), defaults=False
        )
    assert "reader" in str(raised.value)


async def test_self_signed_certificate_is_served_and_logged_as_such(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    """`--self-signed` serves an in-memory certificate that no CA vouches for, and says so in the log."""
    caplog.set_level(logging.INFO, logger="adapter")
    files = cluster.files()
    adapter = await start_adapter(
        "--self-signed", "--client-ca-file", str(files["client_ca"]),
        "--requestheader-client-ca-file", str(files["front_proxy_ca"]), defaults=False,
    )  # fmt: skip
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await adapter.get("/healthz")
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    _reader, writer = await asyncio.open_connection("127.0.0.1", adapter.port, ssl=insecure)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        await _close(writer)
    served = x509.load_der_x509_certificate(der)
    assert served.issuer == served.subject
    assert any("self-signed" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


async def _served_serial(port: int, trust: CA) -> int:
    _reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=trust.client_context(), server_hostname="localhost"
    )
    try:
        return x509.load_der_x509_certificate(
            writer.get_extra_info("ssl_object").getpeercert(True)
        ).serial_number
    finally:
        await _close(writer)


async def _rotate_serving_certificate(cluster: Cluster, port: int) -> None:
    """Replace the serving pair as cert-manager would (each file atomically) and wait until new
    connections get the new certificate."""
    rotated = cluster.serving_ca.issue("vllm-autoscale-rotated", server=True)
    rotated.write(cluster.directory, "serving.next")
    os.replace(cluster.directory / "serving.next.key", cluster.directory / "serving.key")
    os.replace(cluster.directory / "serving.next.crt", cluster.directory / "serving.crt")
    deadline = time.monotonic() + DEADLINE_SECONDS
    while await _served_serial(port, cluster.serving_ca) != rotated.serial:
        assert time.monotonic() < deadline, "the rotated certificate was never served"
        await asyncio.sleep(0.05)


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
    """Replacing the files mid-run: new handshakes get the new certificate; an open keep-alive connection keeps working."""
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
        await _rotate_serving_certificate(cluster, adapter.port)

        assert await _keep_alive_get(reader, writer, metric_path(), HPA_USER) == 200
        still = x509.load_der_x509_certificate(writer.get_extra_info("ssl_object").getpeercert(True))
        assert still.serial_number == old_serial
    finally:
        await _close(writer)


async def _poll_status(adapter: Adapter, path: str, expected: int, **kwargs: Any) -> int:
    """GET until the answer is `expected` or the deadline passes; the last status."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        try:
            status, _ = await adapter.get(path, **kwargs)
        except aiohttp.ClientError:
            status = 0  # refused in the handshake: the CA is not (yet) trusted
        if status == expected or time.monotonic() > deadline:
            return status
        await asyncio.sleep(0.05)


async def test_client_ca_file_rotation_is_picked_up(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI
) -> None:
    """Replacing --client-ca-file mid-run makes the new CA's certificates work, in TLS and in authentication."""
    adapter = await start_adapter(config_text="security:\n  tls_reload_interval: 50ms\n")
    rotated = CA("kubernetes-2")
    alice = rotated.issue("alice")
    assert await _poll_status(adapter, metric_path("a"), 0, cert=alice) == 0
    (cluster.directory / "client-ca.next").write_bytes(rotated.cert_pem + cluster.client_ca.cert_pem)
    os.replace(cluster.directory / "client-ca.next", cluster.directory / "client-ca.crt")
    assert await _poll_status(adapter, metric_path("a"), 200, cert=alice) == 200


async def _trusting_the_configmap(
    start_adapter: StartAdapter, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> Adapter:
    """An adapter whose front-proxy CA comes from the cluster's ConfigMap, re-read on every 50 ms
    reload tick instead of once a minute."""
    from adapter.security import serving as security

    monkeypatch.setattr(security, "CLUSTER_AUTHENTICATION_REFRESH_SECONDS", 0.0)
    cluster.kube.config_map = {"requestheader-client-ca-file": cluster.front_proxy_ca.cert_pem.decode()}
    files = cluster.files()
    return await start_adapter(
        "--tls-cert-file", str(files["cert"]), "--tls-private-key-file", str(files["key"]),
        config_text="security:\n  tls_reload_interval: 50ms\n", defaults=False,
    )  # fmt: skip


async def test_configmap_changes_are_picked_up(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rotated front-proxy CA published in the ConfigMap is trusted without a restart."""
    adapter = await _trusting_the_configmap(start_adapter, cluster, monkeypatch)
    rotated = CA("front-proxy-ca-2")
    proxy = rotated.issue("front-proxy-client")
    headers = _front_proxy_headers(HPA_USER)
    assert await _poll_status(adapter, metric_path(), 0, cert=proxy, headers=headers) == 0
    cluster.kube.config_map = {"requestheader-client-ca-file": rotated.cert_pem.decode()}
    assert await _poll_status(adapter, metric_path(), 200, cert=proxy, headers=headers) == 200


async def test_an_unreadable_configmap_does_not_hold_back_a_certificate_rotation(
    start_adapter: StartAdapter,
    cluster: Cluster,
    grants: FakeKubeAPI,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While the kube-apiserver fails the ConfigMap read, the rotated serving certificate is still picked up and
    the last front-proxy CA read is still trusted."""
    adapter = await _trusting_the_configmap(start_adapter, cluster, monkeypatch)
    grants.failing = True
    await _rotate_serving_certificate(cluster, adapter.port)
    assert any(
        "unable to re-read the cluster's authentication settings" in r.getMessage() for r in caplog.records
    )
    grants.failing = False
    status, _ = await adapter.get(
        metric_path(), cert=cluster.front_proxy, headers=_front_proxy_headers(HPA_USER)
    )
    assert status == 200


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(["--insecure-serving", "--address", "0.0.0.0"], "refuses address '0.0.0.0'",
                     id="insecure serving refuses a non-loopback address"),
        pytest.param(["--insecure-serving", "--self-signed"], "cannot be combined",
                     id="insecure serving with a certificate is contradictory"),
        pytest.param(["--tls-cert-file", "x.crt"], "must be set together", id="certificate without key"),
        pytest.param(["--self-signed", "--tls-cert-file", "x.crt", "--tls-private-key-file", "x.key"],
                     "--self-signed cannot be combined", id="self-signed and files"),
        pytest.param([], "serving needs a certificate", id="no certificate and not insecure"),
        pytest.param(["--insecure-serving"], None, id="insecure serving on loopback is allowed"),
        pytest.param(["--self-signed"], None, id="self-signed alone is allowed"),
        pytest.param(["--tls-cert-file", "x.crt", "--tls-private-key-file", "x.key"], None, id="files are allowed"),
    ],
)  # fmt: skip
def test_check_serving(flags: list[str], message: str | None) -> None:
    """TLS always, unless explicitly insecure on loopback; exactly one certificate source."""
    args = cli.build_parser().parse_args(["serve", *flags])
    config = load_file(None, cli.serve_overrides(args))
    if message is None:
        server.check_serving(config)
    else:
        with pytest.raises(ConfigError, match=message):
            server.check_serving(config)


def test_serve_flags_become_security_settings() -> None:
    """Comma-separated flags become lists; an empty allowed-names flag means "any CN of the CA"."""
    args = cli.build_parser().parse_args([
        "serve", "--self-signed", "--requestheader-allowed-names", "",
        "--requestheader-group-headers", "X-A, X-B", "--authorization-always-allow-paths", "/healthz,/debug/*",
        "--no-authorize-metrics", "--kubeconfig", "/k",
    ])  # fmt: skip
    security = load_file(None, cli.serve_overrides(args)).security
    assert security.requestheader_allowed_names == ()
    assert security.requestheader_group_headers == ("X-A", "X-B")
    assert security.requestheader_username_headers is None
    assert security.authorization_always_allow_paths == ("/healthz", "/debug/*")
    assert security.authorize_metrics is False
    assert security.kubeconfig == "/k"
    assert load_file(None, {}).security.authorize_metrics is True
