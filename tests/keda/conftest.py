"""The real external scaler in-process: `create_app` with a FakeSource, its provider served over gRPC.

The gRPC server (`adapter.keda.serving.serve_scaler`) listens on a free loopback port without TLS
(TLS has its own tests) and a real `grpcio` client talks to it; the HTTP API of the same application
answers beside it, so a test can ask both front ends the same question.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from adapter.api.routes import PROVIDER, TELEMETRY
from adapter.keda import externalscaler_pb2 as pb
from adapter.keda import externalscaler_pb2_grpc as rpc
from adapter.keda.servicer import ExternalScaler
from adapter.keda.serving import serve_scaler
from adapter.telemetry import Telemetry
from adapter.vocabulary.quantity import parse_quantity
from tests.conftest import Client, MakeClient
from tests.fakes import FakeSource

BASE = "/apis/external.metrics.k8s.io/v1beta1"


def ref(namespace: str = "prod", name: str = "llama", **metadata: str) -> pb.ScaledObjectRef:
    """A ScaledObjectRef as KEDA sends it (its own `scalerAddress` included)."""
    return pb.ScaledObjectRef(
        name=name, namespace=namespace, scalerMetadata={"scalerAddress": "adapter:9443", **metadata}
    )


@dataclass
class Harness:
    """One application answering over HTTP and gRPC."""

    http: Client
    stub: Any  # rpc.ExternalScalerStub (generated, untyped)
    fake: FakeSource
    scaler: ExternalScaler

    @property
    def telemetry(self) -> Telemetry:
        return self.scaler.telemetry

    async def http_value(self, metric: str, namespace: str = "prod", selector: str = "") -> float:
        """The value the HTTP API serves for the key, as a float; fails on an error answer."""
        response = await self.http.get(
            f"{BASE}/namespaces/{namespace}/{metric}", params={"labelSelector": selector}
        )
        body = await response.json()
        assert response.status == 200, body
        return parse_quantity(body["items"][0]["value"])

    def calls(self, method: str, code: str) -> float:
        """How many calls of `method` ended with `code`, by the adapter's own counter."""
        value = self.telemetry.registry.get_sample_value(
            "vllm_autoscale_grpc_calls_total", {"method": method, "code": code}
        )
        return value or 0.0


MakeKeda = Callable[..., Awaitable[Harness]]


@pytest.fixture
async def make_keda(make_client: MakeClient) -> AsyncIterator[MakeKeda]:
    """Build the app (`config_text`, `source`) and serve its provider over gRPC; all closed at teardown."""
    stack = contextlib.AsyncExitStack()

    async def make(config_text: str = "", source: FakeSource | None = None) -> Harness:
        client, fake = await make_client(config_text, source)
        app = client.app
        config_interval = app[PROVIDER].cache.refresh_interval
        scaler = ExternalScaler(app[PROVIDER], app[TELEMETRY], refresh_interval=config_interval)
        port = await stack.enter_async_context(serve_scaler(scaler, "127.0.0.1", 0, None))
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stack.push_async_callback(channel.close, None)  # no grace: teardown, no call in flight
        return Harness(client, rpc.ExternalScalerStub(channel), fake, scaler)

    async with stack:
        yield make
