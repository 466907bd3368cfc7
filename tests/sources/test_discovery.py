"""Scrape targets from static URLs and from EndpointSlices (adapter/sources/discovery.py).

No kube-apiserver can run here. The EndpointSlices are recorded JSON written by hand after the
official `discovery.k8s.io/v1` schema (tests/data/endpointslices-ml.json: ready, starting,
terminating and condition-less endpoints, a slice split in two, IPv6, a Service without the
metrics port), deserialized by the official `kubernetes` client's own `ApiClient.deserialize`.
The production lister, `KubeClient.list_endpoint_slices`, is exercised with the real client and a
kubeconfig against `tests.kubeapi_fake.FakeKubeAPI` (a stand-in for the kube-apiserver, over TLS)
so the request path, selector, pagination and deadline are the client's, not ours.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from adapter import kube as kube_module
from adapter.config import ScrapeSettings
from adapter.errors import ConfigError, SourceUnavailable
from adapter.sources.discovery import (
    EndpointSliceDiscovery,
    StaticDiscovery,
    Target,
    static_target,
    targets_from_slices,
)
from tests.kubeapi_fake import FakeKubeAPI

DATA = Path(__file__).resolve().parent.parent / "data"
RECORDED = (DATA / "endpointslices-ml.json").read_text()
RECORDED_ITEMS: list[dict[str, Any]] = json.loads(RECORDED)["items"]
OTHER_COMPONENT: dict[str, Any] = {
    "apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice",
    "addressType": "IPv4",
    "metadata": {"name": "router-1", "namespace": "ops", "labels": {"app.kubernetes.io/component": "router"}},
    "endpoints": [],
    "ports": [],
}


def recorded_slices() -> list[Any]:
    """The recorded list, deserialized by the client exactly as it does an API answer."""
    answer = client.ApiClient().deserialize(RECORDED, "V1EndpointSliceList", "application/json")
    assert isinstance(answer, client.V1EndpointSliceList)
    return list(answer.items)


def llama(ip: str, pod: str) -> Target:
    labels = {"instance": f"{ip}:8000", "namespace": "ml", "pod": pod, "service": "vllm-llama-8b"}
    return Target(f"http://{ip}:8000/metrics", "ml", tuple(sorted(labels.items())))


def test_ready_endpoints_become_targets() -> None:
    """Ready endpoints (and one whose readiness is unset, which the API says to treat as ready)
    become targets; starting and terminating ones do not; an endpoint in two slices is listed
    once; the Service without an `http` port is skipped."""
    targets = targets_from_slices(recorded_slices(), "http", "/metrics")
    qwen_labels = {
        "instance": "[fd00:10:42::5]:8001",
        "namespace": "ml",
        "pod": "vllm-qwen-7b-5c4b8f9d7-zx81q",
        "service": "vllm-qwen-7b",
    }
    assert targets == [
        llama("10.42.1.17", "vllm-llama-8b-6f7c9d5b8-abcde"),
        llama("10.42.1.18", "vllm-llama-8b-6f7c9d5b8-pqrst"),
        llama("10.42.4.2", "vllm-llama-8b-6f7c9d5b8-uvwxy"),
        Target("http://[fd00:10:42::5]:8001/metrics", "ml", tuple(sorted(qwen_labels.items()))),
    ]


def test_a_numeric_port_applies_to_every_slice() -> None:
    """A port number needs no named port: even the grpc-only Service's pod is scraped on it."""
    urls = [t.url for t in targets_from_slices(recorded_slices(), "9100", "/stats")]
    assert urls == [
        "http://10.42.1.17:9100/stats",
        "http://10.42.1.18:9100/stats",
        "http://10.42.4.2:9100/stats",
        "http://[fd00:10:42::5]:9100/stats",
        "http://10.42.9.9:9100/stats",
    ]


def test_a_second_named_port_can_be_chosen() -> None:
    """`port` picks the slice port by name (here a metrics sidecar)."""
    urls = {t.url for t in targets_from_slices(recorded_slices(), "metrics-sidecar", "/metrics")}
    assert urls == {"http://10.42.1.17:9090/metrics", "http://10.42.1.18:9090/metrics"}


@pytest.mark.parametrize(
    ("url", "expected_url", "instance"),
    [
        pytest.param(
            "http://10.0.0.5:8000", "http://10.0.0.5:8000/metrics", "10.0.0.5:8000", id="path appended"
        ),
        pytest.param(
            "http://10.0.0.5:8000/", "http://10.0.0.5:8000/metrics", "10.0.0.5:8000", id="root path replaced"
        ),
        pytest.param("http://vllm:8000/custom", "http://vllm:8000/custom", "vllm:8000", id="own path kept"),
        pytest.param(
            "https://vllm.example",
            "https://vllm.example/metrics",
            "vllm.example:443",
            id="https default port",
        ),
        pytest.param("http://[::1]:8000/metrics", "http://[::1]:8000/metrics", "[::1]:8000", id="ipv6 host"),
    ],
)
def test_static_targets(url: str, expected_url: str, instance: str) -> None:
    """A static URL gets the scrape path when it has none, and `instance`/`namespace` labels."""
    target = static_target(url, "team-a", "/metrics")
    assert target == Target(expected_url, "team-a", (("instance", instance), ("namespace", "team-a")))


@pytest.mark.parametrize("url", ["10.0.0.5:8000", "ftp://host/metrics", "http:///metrics"])
def test_a_static_target_must_be_an_http_url(url: str) -> None:
    """A target the source could never fetch is a configuration error naming it."""
    with pytest.raises(ConfigError, match=f"scrape target '{url}' must be an http:// or https:// URL"):
        static_target(url, "default", "/metrics")


def test_static_discovery_lists_each_url_once() -> None:
    """Repeated flags do not scrape a pod twice (its values would count twice)."""
    discovery = StaticDiscovery(["http://a:1", "http://a:1/metrics", "http://b:1"], "default")
    assert [t.url for t in discovery.targets()] == ["http://a:1/metrics", "http://b:1/metrics"]
    assert discovery.want("other") is False


class FakeLister:
    """Records the (namespace, selector) of each list; answers the recorded slices for `ml`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, str]] = []
        self.error: SourceUnavailable | None = None

    async def __call__(self, namespace: str | None, selector: str) -> list[Any]:
        self.calls.append((namespace, selector))
        if self.error is not None:
            raise self.error
        return recorded_slices() if namespace in ("ml", None) else []


async def test_discovery_lists_the_namespaces_asked_for() -> None:
    """Without configured namespaces, each namespace asked for is listed; a non-namespaced
    request switches to one cluster-wide list."""
    lister = FakeLister()
    discovery = EndpointSliceDiscovery(ScrapeSettings(), lister)
    assert discovery.want("ml") is True
    assert discovery.want("ml") is False
    assert discovery.want("team-b") is True
    await discovery.refresh()
    assert lister.calls == [
        ("ml", "app.kubernetes.io/component=vllm"),
        ("team-b", "app.kubernetes.io/component=vllm"),
    ]
    assert len(discovery.targets()) == 4
    assert discovery.want(None) is True
    lister.calls.clear()
    await discovery.refresh()
    assert lister.calls == [(None, "app.kubernetes.io/component=vllm")]


async def test_configured_namespaces_are_the_only_ones_listed() -> None:
    """`discovery_namespaces` fixes the scope: other namespaces are never listed."""
    lister = FakeLister()
    settings = ScrapeSettings(discovery_namespaces=("ml",), discovery_selector="team=a")
    discovery = EndpointSliceDiscovery(settings, lister)
    assert discovery.want("elsewhere") is False
    assert discovery.want(None) is False
    await discovery.refresh()
    assert lister.calls == [("ml", "team=a")]


async def test_a_failed_list_keeps_the_previous_targets() -> None:
    """A failed list is reported with its cause, and the last known targets stay (their pods'
    own scrapes say whether they are still there)."""
    lister = FakeLister()
    discovery = EndpointSliceDiscovery(ScrapeSettings(), lister)
    discovery.want("ml")
    discovery.want("team-b")
    await discovery.refresh()
    before = discovery.targets()
    lister.error = SourceUnavailable("unable to list EndpointSlices in namespace 'ml': HTTP 403 Forbidden")
    with pytest.raises(SourceUnavailable) as caught:
        await discovery.refresh()
    # One cause per failed namespace, each as the lister worded it.
    assert str(caught.value) == (
        "unable to list EndpointSlices in namespace 'ml': HTTP 403 Forbidden; "
        "unable to list EndpointSlices in namespace 'ml': HTTP 403 Forbidden"
    )
    assert discovery.targets() == before


async def test_a_failed_switch_to_a_cluster_wide_list_keeps_the_namespaced_targets() -> None:
    """When a non-namespaced request switches discovery to one cluster-wide list and that list
    fails, the targets already found per namespace stay until it succeeds: losing them would drop
    every pod's rate history and answer "no targets" for a namespace that has pods."""
    lister = FakeLister()
    discovery = EndpointSliceDiscovery(ScrapeSettings(), lister)
    discovery.want("ml")
    await discovery.refresh()
    before = discovery.targets()
    assert len(before) == 4
    assert discovery.want(None) is True
    lister.error = SourceUnavailable("unable to list EndpointSlices in all namespaces: HTTP 403 Forbidden")
    with pytest.raises(SourceUnavailable, match="unable to list EndpointSlices in all namespaces"):
        await discovery.refresh()
    assert discovery.targets() == before
    lister.error = None
    await discovery.refresh()
    assert lister.calls[-1] == (None, "app.kubernetes.io/component=vllm")
    assert discovery.targets() == before


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[FakeKubeAPI]:
    """The fake kube-apiserver holding the recorded slices, plus one of another component."""
    async with FakeKubeAPI.running(tmp_path) as fake:
        fake.endpoint_slices = [*RECORDED_ITEMS, OTHER_COMPONENT]
        yield fake


async def test_kube_client_lists_endpoint_slices_page_by_page(
    kube: FakeKubeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real client asks for the slices of a namespace with the label selector and follows
    `continue` tokens (pages of three here); discovery gets the targets of every page."""
    monkeypatch.setattr(kube_module, "_PAGE_SIZE", 3)
    async with kube.client() as kube_client:
        discovery = EndpointSliceDiscovery(ScrapeSettings(), kube_client.list_endpoint_slices)
        discovery.want("ml")
        await discovery.refresh()
        assert len(discovery.targets()) == 4
        selector = {"labelSelector": "app.kubernetes.io/component=vllm", "limit": "3"}
        assert kube.slice_lists == [("ml", selector), ("ml", {**selector, "continue": "3"})]
        kube.slice_lists.clear()
        slices = await kube_client.list_endpoint_slices(None, "app.kubernetes.io/component=router")
        assert [piece.metadata.name for piece in slices] == ["router-1"]
        assert kube.slice_lists == [
            (None, {"labelSelector": "app.kubernetes.io/component=router", "limit": "3"})
        ]


async def test_a_failing_kube_apiserver_is_a_discovery_error_naming_the_call(kube: FakeKubeAPI) -> None:
    """An error answer is `SourceUnavailable` with the namespace and the HTTP status."""
    async with kube.client() as kube_client:
        discovery = EndpointSliceDiscovery(ScrapeSettings(), kube_client.list_endpoint_slices)
        discovery.want("ml")
        kube.failing = True
        with pytest.raises(
            SourceUnavailable,
            match=r"^unable to list EndpointSlices in namespace 'ml': HTTP 500 Internal Server Error$",
        ):
            await discovery.refresh()


async def test_a_list_has_the_clients_deadline(kube: FakeKubeAPI) -> None:
    """A kube-apiserver that never answers fails the list within the client's timeout, as it
    fails a review: discovery has no deadline of its own to forget."""
    async with kube.client(request_timeout=0.2) as kube_client:
        kube.stalled = True
        started = asyncio.get_running_loop().time()
        # Whichever fires first, urllib3's read timeout or the call's deadline, names the call.
        with pytest.raises(SourceUnavailable, match=r"^unable to list EndpointSlices in namespace 'ml': "):
            await kube_client.list_endpoint_slices("ml", "a=b")
        assert asyncio.get_running_loop().time() - started < 2.0
        assert kube.stalled_calls == 1
