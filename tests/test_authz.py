"""`adapter.authz` and the request mapping of `adapter.access`: what is asked, and how answers are cached.

SubjectAccessReviews go through the official `kubernetes` client to
`tests.kubeapi_fake.FakeKubeAPI`, the stand-in for the kube-apiserver.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapter.access import request_attributes
from adapter.authn import UserInfo
from adapter.authz import Attributes, Authorizer, NonResourceAttributes, PathPatterns, ResourceAttributes
from adapter.errors import AdapterError
from adapter.kube import KubeClient
from adapter.ttlcache import TTLCache
from tests.kubeapi_fake import FakeKubeAPI, Grant

GROUP = "external.metrics.k8s.io"
ALICE = UserInfo("alice", ("team-a",), extra=(("scopes", ("read",)),))
READ_A = ResourceAttributes("get", GROUP, "v1beta1", "vllm_requests_waiting", "a")
READ_B = ResourceAttributes("get", GROUP, "v1beta1", "vllm_requests_waiting", "b")


class Clock:
    """A hand-moved monotonic clock for TTL tests."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[FakeKubeAPI]:
    async with FakeKubeAPI.running(tmp_path) as fake:
        fake.grants.append(Grant("alice", resources=("vllm_requests_waiting",), namespaces=("a",)))
        yield fake


@pytest.fixture
async def client(kube: FakeKubeAPI) -> AsyncIterator[KubeClient]:
    client = await KubeClient.connect(str(kube.kubeconfig))
    yield client
    await client.close()


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        pytest.param("GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/a/vllm_tpot_seconds",
                     ResourceAttributes("get", GROUP, "v1beta1", "vllm_tpot_seconds", "a"),
                     id="metric read is get on the metric resource in the namespace"),
        pytest.param("GET", "/apis/external.metrics.k8s.io/v1beta1", ResourceAttributes("list", GROUP, "v1beta1", "*"),
                     id="resource list is list on every resource of the group"),
        pytest.param("GET", "/apis/external.metrics.k8s.io", ResourceAttributes("get", GROUP, "", "*"),
                     id="group document is get on the group"),
        pytest.param("POST", "/apis/external.metrics.k8s.io/v1beta1/namespaces/a/m",
                     ResourceAttributes("create", GROUP, "v1beta1", "m", "a"), id="POST is create"),
        pytest.param("GET", "/apis", NonResourceAttributes("get", "/apis"), id="API group list is a non-resource URL"),
        pytest.param("GET", "/openapi/v2", NonResourceAttributes("get", "/openapi/v2"), id="openapi is a non-resource URL"),
        pytest.param("GET", "/metrics", NonResourceAttributes("get", "/metrics"), id="metrics is a non-resource URL"),
        pytest.param("GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/a%2Fb/m",
                     ResourceAttributes("get", GROUP, "v1beta1", "m", "a/b"),
                     id="an encoded slash stays inside its segment, as the router sees it"),
        pytest.param("GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces//m",
                     NonResourceAttributes("get", "/apis/external.metrics.k8s.io/v1beta1/namespaces//m"),
                     id="an empty namespace is never a cluster-wide read"),
        pytest.param("GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/a/b%20c",
                     ResourceAttributes("get", GROUP, "v1beta1", "b c", "a"), id="segments are percent-decoded"),
    ],
)  # fmt: skip
def test_request_attributes(method: str, path: str, expected: Attributes) -> None:
    """Requests map to SubjectAccessReview attributes as the kube-apiserver's request info would."""
    assert request_attributes(method, path) == expected


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
                "verb": "get", "group": GROUP, "version": "v1beta1",
                "resource": "vllm_requests_waiting", "namespace": "a",
            },
        }
    ]  # fmt: skip


async def test_non_resource_review(kube: FakeKubeAPI, client: KubeClient) -> None:
    """A plain path is reviewed as nonResourceAttributes."""
    kube.grants.append(Grant("alice", paths=("/metrics",)))
    assert (await Authorizer(client).authorize(ALICE, NonResourceAttributes("get", "/metrics"))).allowed
    assert kube.access_reviews[0]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
    assert "resourceAttributes" not in kube.access_reviews[0]


async def test_namespace_isolation(client: KubeClient) -> None:
    """A user allowed in namespace a is denied in namespace b."""
    authorizer = Authorizer(client)
    assert (await authorizer.authorize(ALICE, READ_A)).allowed
    assert not (await authorizer.authorize(ALICE, READ_B)).allowed


async def test_allowed_and_denied_decisions_have_their_own_ttl(kube: FakeKubeAPI, client: KubeClient) -> None:
    """An allow is reused for the allowed TTL, a deny for the denied TTL, independently."""
    clock = Clock()
    authorizer = Authorizer(client, allowed_ttl=30, denied_ttl=5, cache=TTLCache(clock=clock))
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
    clock = Clock()
    authorizer = Authorizer(client, allowed_ttl=10, denied_ttl=10, cache=TTLCache(clock=clock))
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
    """When the kube-apiserver cannot answer, the authorizer raises (never allows) and asks again next time."""
    authorizer = Authorizer(client)
    kube.failing = True
    with pytest.raises(AdapterError, match="unable to create subjectaccessreview: HTTP 500"):
        await authorizer.authorize(ALICE, READ_A)
    kube.failing = False
    assert (await authorizer.authorize(ALICE, READ_A)).allowed
