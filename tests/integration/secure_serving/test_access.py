"""Secure serving end to end: who may read what, as the aggregator, the HPA, Prometheus and strangers
reach the real adapter over real TLS.

Every test starts the adapter in-process through `server.serve_config` (flags parsed by the real
parser) on a free port, with certificates the tests make with `cryptography` and a `FakeSource`.
TokenReview and SubjectAccessReview are answered by `tests.kubeapi_fake.FakeKubeAPI`, a stand-in
for the kube-apiserver (which cannot run here), reached through the official `kubernetes` client
(tests/integration/secure_serving/harness.py).
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest

from tests.integration.secure_serving.harness import (
    BASE,
    DEADLINE_SECONDS,
    HPA_USER,
    METRIC,
    Cluster,
    StartAdapter,
    answers,
    close,
    front_proxy_headers,
    metric_path,
)
from tests.kubeapi_fake import FakeKubeAPI, Grant


@pytest.mark.parametrize(
    ("cert", "headers", "path", "expected", "reviewed_user"),
    [
        pytest.param(None, {}, metric_path(), 401, None, id="no client certificate and no token is 401"),
        pytest.param(
            "front-proxy",
            front_proxy_headers(HPA_USER, "system:serviceaccounts"),
            metric_path(),
            200,
            HPA_USER,
            id="allowed front proxy naming an authorized user is 200",
        ),
        pytest.param(
            "front-proxy",
            front_proxy_headers("carol"),
            metric_path(),
            403,
            "carol",
            id="allowed front proxy naming a user the SAR denies is 403",
        ),
        pytest.param(
            "front-proxy-disallowed-cn",
            front_proxy_headers(HPA_USER),
            metric_path(),
            401,
            None,
            id="requestheader certificate with a CN not in allowed names is 401",
        ),
        pytest.param(
            "front-proxy", {}, metric_path(), 401, None, id="front proxy without a user header is 401"
        ),
        pytest.param(
            "mallory",
            front_proxy_headers(HPA_USER),
            metric_path(),
            403,
            "mallory",
            id="X-Remote-User over a client-ca certificate is ignored: the cert's CN is the user",
        ),
        pytest.param(
            "alice", {}, metric_path("a"), 200, "alice", id="client certificate CN allowed in a is 200"
        ),
        pytest.param(
            "alice",
            {},
            metric_path("b"),
            403,
            "alice",
            id="namespace isolation: user allowed in a cannot read b",
        ),
        pytest.param(
            None,
            {"Authorization": "Bearer bob-token"},
            metric_path("a"),
            200,
            "bob",
            id="valid bearer token is 200",
        ),
        pytest.param(
            None,
            {"Authorization": "Bearer bob-token"},
            metric_path("b"),
            403,
            "bob",
            id="valid bearer token in a namespace without a grant is 403",
        ),
        pytest.param(
            None,
            {"Authorization": "Bearer forged"},
            metric_path(),
            401,
            None,
            id="invalid bearer token is 401",
        ),
        pytest.param(
            None,
            {"Authorization": "Bearer bob-token", **front_proxy_headers(HPA_USER, "system:masters")},
            metric_path("b"),
            403,
            "bob",
            id="X-Remote-User beside a bearer token is ignored: the token's user",
        ),
        pytest.param(
            None,
            front_proxy_headers(HPA_USER, "system:masters"),
            metric_path(),
            401,
            None,
            id="X-Remote-User without any certificate is 401",
        ),
        pytest.param(
            "front-proxy",
            front_proxy_headers(HPA_USER),
            BASE,
            200,
            HPA_USER,
            id="discovery is list on the group",
        ),
        pytest.param("alice", {}, BASE, 403, "alice", id="discovery without list on the group is 403"),
    ],
)
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
        await adapter.get(metric_path("a"), cert=cert, headers=front_proxy_headers(HPA_USER))
    assert grants.access_reviews == []


async def test_sar_decisions_are_cached(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI
) -> None:
    """The HPA's repeated polls cost one SubjectAccessReview per user, metric and namespace within the TTL."""
    adapter = await start_adapter()
    headers = front_proxy_headers(HPA_USER)
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
    await answers(adapter, path, 200)  # /readyz turns 200 once the source has answered its first ping
    assert grants.access_reviews == []


PROMETHEUS_USER = "system:serviceaccount:monitoring:prometheus"


@pytest.mark.parametrize(
    ("flags", "token", "grant", "expected"),
    [
        pytest.param((), None, None, 401, id="metrics without credentials is 401 by default"),
        pytest.param((), "prometheus-token", None, 403, id="metrics without a nonResourceURL grant is 403"),
        pytest.param(
            (),
            "prometheus-token",
            Grant(PROMETHEUS_USER, paths=("/metrics",)),
            200,
            id="metrics with get on the /metrics nonResourceURL is 200",
        ),
        pytest.param(
            (),
            "prometheus-token",
            Grant("system:serviceaccounts", paths=("/metrics",)),
            200,
            id="a grant to the token's group counts",
        ),
        pytest.param(
            (),
            "prometheus-token",
            Grant(PROMETHEUS_USER, verbs=("list",), paths=("/metrics",)),
            403,
            id="a grant of another verb on /metrics is 403",
        ),
        pytest.param(
            (),
            "prometheus-token",
            Grant(PROMETHEUS_USER, verbs=("get",), resources=("*",)),
            403,
            id="a grant on external metrics is not a grant on /metrics",
        ),
        pytest.param(
            ("--no-authorize-metrics",),
            None,
            None,
            200,
            id="metrics open to anyone with --no-authorize-metrics",
        ),
    ],
)
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
    grants.tokens["prometheus-token"] = {
        "username": PROMETHEUS_USER,
        "uid": "p-1",
        "groups": ["system:serviceaccounts", "system:authenticated"],
    }
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
        pytest.param(
            f"/healthz/..{metric_path('b')}",
            "404",
            [],
            id="dot-dot after an always-allowed prefix reaches no metric",
        ),
        pytest.param(
            f"/healthz/%2e%2e{metric_path('b')}",
            "404",
            [],
            id="encoded dot-dot after an always-allowed prefix reaches no metric",
        ),
        pytest.param(
            f"{BASE}/namespaces/a%2Fb/{METRIC}",
            "403",
            ["a/b"],
            id="an encoded slash is authorized as the namespace the handler would read",
        ),
        pytest.param(
            f"{BASE}/namespaces/b/{METRIC}?namespace=a",
            "403",
            ["b"],
            id="a query string cannot change the namespace",
        ),
        pytest.param(
            f"{BASE}/namespaces/a/../b/{METRIC}",
            "403",
            [],
            id="dot segments from an allowed namespace are not the metric",
        ),
        pytest.param(f"{BASE}/namespaces/b/{METRIC}/", "403", [], id="a trailing slash is not the metric"),
        pytest.param(
            f"/{BASE}/namespaces/b/{METRIC}", "403", [], id="a doubled leading slash is not the metric"
        ),
        pytest.param(
            f"/%61pis/external.metrics.k8s.io/v1beta1/namespaces/b/{METRIC}",
            "403",
            ["b"],
            id="a percent-encoded spelling is authorized as the metric it reaches",
        ),
    ],
)
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
        await close(writer)
    assert status_line.split()[1] == expected, status_line
    resource_reviews = [r for r in grants.access_reviews if "resourceAttributes" in r]
    assert [r["resourceAttributes"]["namespace"] for r in resource_reviews] == reviewed_namespaces


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
