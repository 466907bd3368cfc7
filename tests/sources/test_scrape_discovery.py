"""The scrape source over EndpointSlice discovery (adapter/sources/discovery.py): discovered pods
are scraped with their `pod` label and dropped when they leave; a failed listing is 503 with its
cause, never "no targets".

EndpointSlices are recorded-schema objects built through the `kubernetes` client's models and
handed to the discovery by a lister function (no kube-apiserver runs here); the pods are real
HTTP servers on loopback.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes import client

from adapter.config import ScrapeSettings
from adapter.errors import NoTargets, SourceUnavailable
from adapter.sources.discovery import EndpointSliceDiscovery
from adapter.sources.scrape import ScrapeSource
from adapter.vocabulary import catalogue, selectors
from tests.sources.scrape_fleet import EVERYTHING, INTERVAL, TIMEOUT, ServeApp, metric, rounds
from tests.vllm_pages import PodLoad, pod_app

#: `pods_on_ports(n)`: `n` pods, each `(port, load)`
PodsOnPorts = Callable[[int], Awaitable[list[tuple[int, PodLoad]]]]


@pytest.fixture
async def pods_on_ports(aiohttp_server: ServeApp) -> PodsOnPorts:
    """`n` pods, each its own server on its own port (EndpointSlices name one port per slice)."""

    async def make(n: int) -> list[tuple[int, PodLoad]]:
        made: list[tuple[int, PodLoad]] = []
        for i in range(n):
            load = PodLoad("llama", waiting=float(i + 1))
            server = await aiohttp_server(pod_app(load))
            assert server.port is not None  # set once the server has started
            made.append((server.port, load))
        return made

    return make


def endpoint_slice(name: str, port: int, ready: bool = True) -> Any:
    """One EndpointSlice (the client's model) with one loopback endpoint."""
    return client.V1EndpointSlice.from_dict(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"vllm-{name}",
                "namespace": "ml",
                "labels": {"kubernetes.io/service-name": "vllm"},
            },
            "addressType": "IPv4",
            "endpoints": [
                {
                    "addresses": ["127.0.0.1"],
                    "conditions": {"ready": ready},
                    "targetRef": {"kind": "Pod", "namespace": "ml", "name": name},
                }
            ],
            "ports": [{"name": "http", "port": port}],
        }
    )


async def test_discovered_pods_come_and_go(pods_on_ports: PodsOnPorts) -> None:
    """Pods listed in EndpointSlices are scraped with their `pod` label; a pod that leaves the
    slices (or turns unready) is dropped with its history; none left is NoTargets."""
    (port0, _), (port1, _) = await pods_on_ports(2)
    slices = [endpoint_slice("vllm-0", port0), endpoint_slice("vllm-1", port1)]
    settings = ScrapeSettings(interval=INTERVAL, timeout=TIMEOUT, discovery_interval=INTERVAL)

    async def lister(namespace: str | None, selector: str) -> list[Any]:
        return list(slices)

    source = ScrapeSource(settings, catalogue.BUILTIN, discovery=EndpointSliceDiscovery(settings, lister))
    try:
        waiting = metric("vllm_requests_waiting")
        assert (await source.fetch(waiting, "ml", EVERYTHING)).value == 3.0
        assert (await source.fetch(waiting, "ml", selectors.parse("pod=vllm-1"))).value == 2.0
        slices[1] = endpoint_slice("vllm-1", port1, ready=False)
        await rounds(source, 3)
        assert (await source.fetch(waiting, "ml", EVERYTHING)).targets == 1
        slices.clear()
        await rounds(source, 3)
        with pytest.raises(
            NoTargets, match=r"no scrape targets in namespace 'ml' .* among EndpointSlices matching"
        ):
            await source.fetch(waiting, "ml", EVERYTHING)
    finally:
        await source.close()


async def test_failed_discovery_without_targets_is_unavailable() -> None:
    """If the API server cannot be listed and no targets are known, the answer is 503 with the
    cause, never "no targets"."""

    async def broken(namespace: str | None, selector: str) -> list[Any]:
        raise SourceUnavailable(
            f"unable to list EndpointSlices in namespace {namespace!r}: Connection refused"
        )

    settings = ScrapeSettings(interval=INTERVAL, timeout=TIMEOUT)
    source = ScrapeSource(settings, catalogue.BUILTIN, discovery=EndpointSliceDiscovery(settings, broken))
    try:
        with pytest.raises(
            SourceUnavailable, match="unable to list EndpointSlices in namespace 'ml': Connection refused"
        ):
            await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)
        with pytest.raises(SourceUnavailable):
            await source.ping()
    finally:
        await source.close()
