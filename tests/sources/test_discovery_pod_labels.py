"""`scrape.pod_labels`: discovered targets get the pods' role label (adapter/sources/discovery.py).

The recorded EndpointSlices of tests/data name their pods; a fake pod lister gives two of them the
llm-d role label. A failed pod listing keeps the namespace's earlier targets: a target must never
lose its role (and so silently leave a role-bound metric's pool) for one failed call.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from adapter.config import ScrapeSettings
from adapter.errors import SourceUnavailable
from adapter.sources.discovery import EndpointSliceDiscovery
from tests.sources.test_discovery import recorded_slices

ROLES = {"vllm-llama-8b-6f7c9d5b8-abcde": "prefill", "vllm-llama-8b-6f7c9d5b8-pqrst": "decode"}


class Pods:
    def __init__(self) -> None:
        self.calls: list[tuple[str | None, str]] = []
        self.error: SourceUnavailable | None = None

    async def __call__(self, namespace: str | None, selector: str) -> list[Any]:
        self.calls.append((namespace, selector))
        if self.error is not None:
            raise self.error
        return [
            SimpleNamespace(
                metadata=SimpleNamespace(namespace="ml", name=pod, labels={"llm-d.ai/role": role})
            )
            for pod, role in ROLES.items()
        ]


async def slices(namespace: str | None, selector: str) -> list[Any]:
    return recorded_slices()


async def test_discovered_pods_carry_their_role_as_a_prometheus_label() -> None:
    pods = Pods()
    discovery = EndpointSliceDiscovery(ScrapeSettings(pod_labels=("llm-d.ai/role",)), slices, pods)
    discovery.want("ml")
    await discovery.refresh()
    assert pods.calls == [("ml", "llm-d.ai/role")], "one listing of the pods that have the key"
    roles = {dict(t.labels).get("pod"): dict(t.labels).get("llm_d_ai_role") for t in discovery.targets()}
    assert roles["vllm-llama-8b-6f7c9d5b8-abcde"] == "prefill"
    assert roles["vllm-llama-8b-6f7c9d5b8-pqrst"] == "decode"
    assert roles["vllm-llama-8b-6f7c9d5b8-uvwxy"] is None, "a pod without the label has no role"

    pods.error = SourceUnavailable("unable to list pods in namespace 'ml': HTTP 403 Forbidden")
    before = discovery.targets()
    with pytest.raises(SourceUnavailable, match="403"):
        await discovery.refresh()
    assert discovery.targets() == before


async def test_without_pod_labels_no_pod_is_listed() -> None:
    pods = Pods()
    discovery = EndpointSliceDiscovery(ScrapeSettings(), slices, pods)
    discovery.want("ml")
    await discovery.refresh()
    assert pods.calls == []
    assert all("llm_d_ai_role" not in dict(t.labels) for t in discovery.targets())
