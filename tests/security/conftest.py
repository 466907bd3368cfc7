"""Fixtures of the security tests: the fake kube-apiserver and a client of it.

`tests.kubeapi_fake.FakeKubeAPI` stands in for the kube-apiserver (which cannot run here); it is
reached through the official `kubernetes` client, as the adapter reaches the real one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapter.kube import KubeClient
from tests.kubeapi_fake import FakeKubeAPI, Grant


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[FakeKubeAPI]:
    """A fake kube-apiserver that knows token `good` (user bob, of group devs) and lets alice get
    `vllm_requests_waiting` in namespace `a`."""
    async with FakeKubeAPI.running(tmp_path) as fake:
        fake.tokens["good"] = {"username": "bob", "uid": "42", "groups": ["devs"], "extra": {"scopes": ["x"]}}
        fake.grants.append(Grant("alice", resources=("vllm_requests_waiting",), namespaces=("a",)))
        yield fake


@pytest.fixture
async def client(kube: FakeKubeAPI) -> AsyncIterator[KubeClient]:
    """The adapter's Kubernetes client of `kube`."""
    async with kube.client() as client:
        yield client
