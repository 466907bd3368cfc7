"""`adapter.security.authz` and the request mapping of `adapter.security.access`: what is asked, and how
answers are cached.

SubjectAccessReviews go through the official `kubernetes` client to
`tests.kubeapi_fake.FakeKubeAPI`, the stand-in for the kube-apiserver.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from adapter.api import health
from adapter.api import routes as api
from adapter.errors import ReviewUnavailable
from adapter.kube import KubeClient
from adapter.security.access import request_attributes
from adapter.security.authn import UserInfo
from adapter.security.authz import (
    Attributes,
    Authorizer,
    NonResourceAttributes,
    PathPatterns,
    ResourceAttributes,
)
from adapter.security.ttlcache import TTLCache
from tests.fakes import HandClock
from tests.kubeapi_fake import FakeKubeAPI, Grant

GROUP = "external.metrics.k8s.io"
ALICE = UserInfo("alice", ("team-a",), extra=(("scopes", ("read",)),))
READ_A = ResourceAttributes("get", GROUP, "v1beta1", "vllm_requests_waiting", "a")
READ_B = ResourceAttributes("get", GROUP, "v1beta1", "vllm_requests_waiting", "b")


@pytest.fixture
async def resolve() -> AsyncIterator[Callable[[str, str], Awaitable[Attributes]]]:
    """Send a raw request line to a server with the adapter's real routes; the attributes it was mapped to.

    The request is sent byte for byte (no client library normalizes it), and the mapping is taken
    in a middleware, where the security middleware takes it, after aiohttp has resolved the route.
    """
    seen: list[Attributes] = []

    @web.middleware
    async def capture(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        seen.append(request_attributes(request))
        return web.Response(status=204)

    app = web.Application(middlewares=[capture])
    api.add_routes(app)
    health.add_routes(app)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]

    async def ask(method: str, raw_path: str) -> Attributes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(
                f"{method} {raw_path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode()
            )
            status = (await asyncio.wait_for(reader.readline(), 5)).decode()
            assert status.split()[1] == "204", status
        finally:
            writer.close()
            await writer.wait_closed()
        return seen.pop()

    try:
        yield ask
    finally:
        await runner.cleanup()


BASE = f"/apis/{GROUP}/v1beta1"


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        pytest.param(
            "GET",
            f"{BASE}/namespaces/a/vllm_tpot_seconds",
            ResourceAttributes("get", GROUP, "v1beta1", "vllm_tpot_seconds", "a"),
            id="metric read is get on the metric resource in the namespace",
        ),
        pytest.param(
            "HEAD",
            f"{BASE}/namespaces/a/m",
            ResourceAttributes("get", GROUP, "v1beta1", "m", "a"),
            id="HEAD of a metric is get",
        ),
        pytest.param(
            "GET",
            BASE,
            ResourceAttributes("list", GROUP, "v1beta1", "*"),
            id="resource list is list on every resource of the group",
        ),
        pytest.param(
            "GET",
            f"/apis/{GROUP}",
            ResourceAttributes("get", GROUP, "", "*"),
            id="group document is get on the group",
        ),
        pytest.param(
            "POST",
            f"{BASE}/namespaces/a/m",
            NonResourceAttributes("post", f"{BASE}/namespaces/a/m"),
            id="a method no route serves is a non-resource request",
        ),
        pytest.param(
            "GET", "/apis", NonResourceAttributes("get", "/apis"), id="API group list is a non-resource URL"
        ),
        pytest.param(
            "GET",
            "/openapi/v2",
            NonResourceAttributes("get", "/openapi/v2"),
            id="openapi is a non-resource URL",
        ),
        pytest.param(
            "GET",
            "/metrics",
            NonResourceAttributes("get", "/metrics"),
            id="metrics is get on the non-resource URL /metrics (Prometheus' scrape)",
        ),
        pytest.param(
            "GET",
            "/metrics?name[]=x",
            NonResourceAttributes("get", "/metrics"),
            id="a query string is not part of the non-resource path",
        ),
        pytest.param(
            "GET",
            f"{BASE}/namespaces/a%2Fb/m",
            ResourceAttributes("get", GROUP, "v1beta1", "m", "a/b"),
            id="an encoded slash stays inside its segment, as the handler reads it",
        ),
        pytest.param(
            "GET",
            f"{BASE}/namespaces/b/m?namespace=a",
            ResourceAttributes("get", GROUP, "v1beta1", "m", "b"),
            id="a query string cannot change the namespace",
        ),
        pytest.param(
            "GET",
            f"/%61pis/{GROUP}/v1beta1/namespaces/b/m",
            ResourceAttributes("get", GROUP, "v1beta1", "m", "b"),
            id="a percent-encoded spelling of the path is the same resource",
        ),
        pytest.param(
            "GET",
            f"{BASE}/namespaces/%2e%2e/m",
            ResourceAttributes("get", GROUP, "v1beta1", "m", ".."),
            id="an encoded dot-dot namespace is authorized as that literal namespace",
        ),
        pytest.param(
            "GET",
            f"{BASE}/namespaces//m",
            NonResourceAttributes("get", f"{BASE}/namespaces//m"),
            id="an empty namespace is never a cluster-wide read",
        ),
        pytest.param(
            "GET",
            f"{BASE}/namespaces/b/m/",
            NonResourceAttributes("get", f"{BASE}/namespaces/b/m/"),
            id="a trailing slash is a path no route serves, not the metric",
        ),
        pytest.param(
            "GET",
            f"{BASE}/namespaces/a/../b/m",
            NonResourceAttributes("get", f"{BASE}/namespaces/a/../b/m"),
            id="dot segments are not resolved into another namespace",
        ),
        pytest.param(
            "GET",
            f"/{BASE}/namespaces/b/m",
            NonResourceAttributes("get", f"/{BASE}/namespaces/b/m"),
            id="a doubled leading slash is a path no route serves",
        ),
        pytest.param(
            "GET",
            f"{BASE}/namespaces/a/b%20c",
            ResourceAttributes("get", GROUP, "v1beta1", "b c", "a"),
            id="segments are percent-decoded",
        ),
    ],
)
async def test_request_attributes(
    resolve: Callable[[str, str], Awaitable[Attributes]], method: str, path: str, expected: Attributes
) -> None:
    """Requests map to SubjectAccessReview attributes as the route the handler runs under says."""
    assert await resolve(method, path) == expected


@pytest.mark.parametrize(
    ("patterns", "path", "matches"),
    [
        pytest.param(["/healthz"], "/healthz", True, id="exact path matches"),
        pytest.param(["/healthz"], "/healthz/ping", False, id="exact path does not match below it"),
        pytest.param(["/healthz/*"], "/healthz/ping", True, id="trailing star matches a prefix"),
        pytest.param(["/healthz"], "/HEALTHZ", False, id="paths are case-sensitive"),
        pytest.param([], "/healthz", False, id="no patterns match nothing"),
    ],
)
def test_always_allow_paths(patterns: list[str], path: str, matches: bool) -> None:
    """`--authorization-always-allow-paths` takes exact paths and `prefix*` patterns."""
    assert PathPatterns(patterns).matches(path) is matches


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        pytest.param("healthz", "always-allow path 'healthz' must start with '/'", id="relative path"),
        pytest.param(
            "/a/*/b", "always-allow path '/a/\\*/b' must have '\\*' only at its end", id="inner star"
        ),
    ],
)
def test_invalid_always_allow_paths(pattern: str, message: str) -> None:
    """A pattern that would not mean what it says is refused."""
    with pytest.raises(ValueError, match=message):
        PathPatterns([pattern])


async def test_review_carries_the_user_and_the_resource(kube: FakeKubeAPI, client: KubeClient) -> None:
    """The SubjectAccessReview names user, groups, extra, verb, group, version, resource and namespace."""
    decision = await Authorizer(client).authorize(ALICE, READ_A)
    assert decision.allowed
    assert kube.access_reviews == [
        {
            "user": "alice",
            "groups": ["team-a"],
            "extra": {"scopes": ["read"]},
            "resourceAttributes": {
                "verb": "get",
                "group": GROUP,
                "version": "v1beta1",
                "resource": "vllm_requests_waiting",
                "namespace": "a",
            },
        }
    ]


async def test_non_resource_review(kube: FakeKubeAPI, client: KubeClient) -> None:
    """A plain path is reviewed as nonResourceAttributes: exactly the path and verb, nothing else."""
    prometheus = UserInfo("system:serviceaccount:monitoring:prometheus", ("system:serviceaccounts",))
    kube.grants.append(Grant(prometheus.name, paths=("/metrics",)))
    authorizer = Authorizer(client)
    assert (await authorizer.authorize(prometheus, NonResourceAttributes("get", "/metrics"))).allowed
    assert kube.access_reviews[0]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
    assert "resourceAttributes" not in kube.access_reviews[0]
    # The grant is for get on /metrics only.
    assert not (await authorizer.authorize(prometheus, NonResourceAttributes("post", "/metrics"))).allowed
    assert not (
        await authorizer.authorize(prometheus, NonResourceAttributes("get", "/metrics/extra"))
    ).allowed
    assert not (await authorizer.authorize(prometheus, READ_A)).allowed


async def test_a_hanging_kube_apiserver_fails_the_review_within_the_timeout(kube: FakeKubeAPI) -> None:
    """A SubjectAccessReview that is never answered raises
    `ReviewUnavailable` after the timeout, and is not cached."""
    async with kube.client(request_timeout=0.2) as client:
        authorizer = Authorizer(client)
        kube.stalled = True
        started = asyncio.get_running_loop().time()
        with pytest.raises(ReviewUnavailable, match="unable to create subjectaccessreview"):
            await authorizer.authorize(ALICE, READ_A)
        assert asyncio.get_running_loop().time() - started < 2.0
        kube.stalled = False
        assert (await authorizer.authorize(ALICE, READ_A)).allowed


async def test_namespace_isolation(client: KubeClient) -> None:
    """A user allowed in namespace a is denied in namespace b."""
    authorizer = Authorizer(client)
    assert (await authorizer.authorize(ALICE, READ_A)).allowed
    assert not (await authorizer.authorize(ALICE, READ_B)).allowed


async def test_allowed_and_denied_decisions_have_their_own_ttl(kube: FakeKubeAPI, client: KubeClient) -> None:
    """An allow is reused for the allowed TTL, a deny for the denied TTL, independently."""
    clock = HandClock()
    authorizer = Authorizer(client, allowed_ttl=30, denied_ttl=5, cache=TTLCache(monotonic=clock))
    for _ in range(3):
        assert (await authorizer.authorize(ALICE, READ_A)).allowed
        assert not (await authorizer.authorize(ALICE, READ_B)).allowed
    assert len(kube.access_reviews) == 2
    clock.now += 5
    await authorizer.authorize(ALICE, READ_A)
    await authorizer.authorize(ALICE, READ_B)
    assert [r["resourceAttributes"]["namespace"] for r in kube.access_reviews] == ["a", "b", "b"]
    clock.now += 25
    await authorizer.authorize(ALICE, READ_A)
    assert [r["resourceAttributes"]["namespace"] for r in kube.access_reviews] == ["a", "b", "b", "a"]


async def test_a_revoked_grant_takes_effect_after_the_allowed_ttl(
    kube: FakeKubeAPI, client: KubeClient
) -> None:
    """Caching delays a revocation by at most the allowed TTL."""
    clock = HandClock()
    authorizer = Authorizer(client, allowed_ttl=10, denied_ttl=10, cache=TTLCache(monotonic=clock))
    assert (await authorizer.authorize(ALICE, READ_A)).allowed
    kube.grants.clear()
    assert (await authorizer.authorize(ALICE, READ_A)).allowed
    clock.now += 10
    assert not (await authorizer.authorize(ALICE, READ_A)).allowed


async def test_concurrent_identical_requests_share_one_review(kube: FakeKubeAPI, client: KubeClient) -> None:
    """Ten HPA polls arriving together cost one SubjectAccessReview."""
    authorizer = Authorizer(client)
    decisions = await asyncio.gather(*(authorizer.authorize(ALICE, READ_A) for _ in range(10)))
    assert all(d.allowed for d in decisions)
    assert len(kube.access_reviews) == 1


async def test_review_failure_raises_and_is_not_cached(kube: FakeKubeAPI, client: KubeClient) -> None:
    """When the kube-apiserver cannot answer, the authorizer
    raises (never allows) and asks again next time."""
    authorizer = Authorizer(client)
    kube.failing = True
    with pytest.raises(ReviewUnavailable, match="unable to create subjectaccessreview: HTTP 500"):
        await authorizer.authorize(ALICE, READ_A)
    kube.failing = False
    assert (await authorizer.authorize(ALICE, READ_A)).allowed
