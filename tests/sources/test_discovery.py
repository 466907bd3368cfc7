"""Scrape targets from static URLs and from EndpointSlices (adapter/sources/discovery.py).

No kube-apiserver can run here. The EndpointSlices are recorded JSON written by hand after the
official `discovery.k8s.io/v1` schema (tests/data/endpointslices-ml.json: ready, starting,
terminating and condition-less endpoints, a slice split in two, IPv6, a Service without the
metrics port), deserialized by the official `kubernetes` client's own `ApiClient.deserialize`.
`KubernetesLister` is exercised with the real client against a stand-in HTTP server (a mock of the
API server's list endpoint, for the one call it makes) so the request path, selector and
pagination are the client's, not ours.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from adapter.config import ScrapeSettings
from adapter.errors import ConfigError, SourceUnavailable
from adapter.sources.discovery import (
    EndpointSliceDiscovery,
    KubernetesLister,
    StaticDiscovery,
    Target,
    static_target,
    targets_from_slices,
)

DATA = Path(__file__).resolve().parent.parent / "data"
RECORDED = (DATA / "endpointslices-ml.json").read_text()


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
        "instance": "[fd00:10:42::5]:8001", "namespace": "ml",
        "pod": "vllm-qwen-7b-5c4b8f9d7-zx81q", "service": "vllm-qwen-7b",
    }  # fmt: skip
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
        self.error: Exception | None = None

    def __call__(self, namespace: str | None, selector: str) -> list[Any]:
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
    """An API error is reported with its cause, and the last known targets stay (their pods'
    own scrapes say whether they are still there)."""
    lister = FakeLister()
    discovery = EndpointSliceDiscovery(ScrapeSettings(), lister)
    discovery.want("ml")
    await discovery.refresh()
    before = discovery.targets()
    lister.error = ApiException(status=403, reason="Forbidden")
    with pytest.raises(
        SourceUnavailable, match=r"unable to list EndpointSlices in namespace 'ml': ApiException: \(403\)"
    ):
        await discovery.refresh()
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
    lister.error = ApiException(status=403, reason="Forbidden")
    with pytest.raises(SourceUnavailable, match="unable to list EndpointSlices in all namespaces"):
        await discovery.refresh()
    assert discovery.targets() == before
    lister.error = None
    await discovery.refresh()
    assert lister.calls[-1] == (None, "app.kubernetes.io/component=vllm")
    assert discovery.targets() == before


async def test_the_lister_runs_in_a_thread() -> None:
    """The blocking client never runs on the event loop."""
    loop_thread: list[bool] = []

    def lister(namespace: str | None, selector: str) -> list[Any]:
        try:
            asyncio.get_running_loop()
            loop_thread.append(True)
        except RuntimeError:
            loop_thread.append(False)
        return []

    discovery = EndpointSliceDiscovery(ScrapeSettings(), lister)
    discovery.want("ml")
    await discovery.refresh()
    assert loop_thread == [False]


async def test_kubernetes_lister_with_the_official_client(aiohttp_server: Any) -> None:
    """The real client asks for the slices of a namespace with the label selector, and follows
    `continue` tokens; the stand-in API server answers the recorded list in two pages."""
    recorded = json.loads(RECORDED)
    requests: list[tuple[str, dict[str, str]]] = []

    async def list_slices(request: web.Request) -> web.Response:
        requests.append((request.path, dict(request.query)))
        items = recorded["items"]
        if request.query.get("continue") == "page-2":
            body = {**recorded, "items": items[2:]}
        else:
            body = {
                **recorded,
                "metadata": {"resourceVersion": "48213007", "continue": "page-2"},
                "items": items[:2],
            }
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices", list_slices)
    app.router.add_get("/apis/discovery.k8s.io/v1/endpointslices", list_slices)
    server = await aiohttp_server(app)
    configuration = client.Configuration(host=str(server.make_url("")).rstrip("/"))
    lister = KubernetesLister(api=client.DiscoveryV1Api(client.ApiClient(configuration)))

    slices = await asyncio.to_thread(lister, "ml", "app.kubernetes.io/component=vllm")
    assert [s.metadata.name for s in slices] == [item["metadata"]["name"] for item in recorded["items"]]
    assert requests == [
        ("/apis/discovery.k8s.io/v1/namespaces/ml/endpointslices",
         {"labelSelector": "app.kubernetes.io/component=vllm", "limit": "500"}),
        ("/apis/discovery.k8s.io/v1/namespaces/ml/endpointslices",
         {"labelSelector": "app.kubernetes.io/component=vllm", "limit": "500", "continue": "page-2"}),
    ]  # fmt: skip
    requests.clear()
    await asyncio.to_thread(lister, None, "x=y")
    assert [path for path, _ in requests] == ["/apis/discovery.k8s.io/v1/endpointslices"] * 2
