"""A real `vllm-autoscale serve --keda-port` process, and real clients for both of its front ends.

Used by tests/integration/test_keda*.py (and `reason` by tests/keda/test_servicer.py). The adapter runs as a
child process over TLS with real certificates (tests/certs.py); its HTTP side authorizes through
`tests.kubeapi_fake.FakeKubeAPI` (no kube-apiserver can run here), which runs on the test's event loop, so the
tests that use this are async and poll with deadlines (never `time.sleep`, which would stall the fake).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import aiohttp
import grpc

from adapter.keda import externalscaler_pb2 as pb
from adapter.keda import externalscaler_pb2_grpc as rpc
from adapter.keda.status import REASON_KEY
from adapter.vocabulary.quantity import parse_quantity
from tests.certs import CA, Issued
from tests.integration.procs import free_port
from tests.kubeapi_fake import FakeKubeAPI, Grant
from tests.waiting import eventually

T = TypeVar("T")
BASE = "/apis/external.metrics.k8s.io/v1beta1"
#: the client certificate's user; granted every metric in every namespace on the HTTP side
KEDA_USER = "keda-operator"
# Generous for a loaded CI machine; every wait polls and returns as soon as it can.
START_SECONDS = 60.0


@dataclass
class PKI:
    """The certificates of one test module: serving, KEDA's client, the front proxy."""

    directory: Path
    serving_ca: CA = field(default_factory=lambda: CA("serving-ca"))
    client_ca: CA = field(default_factory=lambda: CA("keda-client-ca"))
    front_proxy_ca: CA = field(default_factory=lambda: CA("front-proxy-ca"))

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cert, self.key = self.serving_ca.issue("vllm-autoscale", server=True).write(
            self.directory, "serving"
        )
        self.client_ca_file = self.client_ca.write(self.directory, "client-ca")
        self.front_proxy_file = self.front_proxy_ca.write(self.directory, "front-proxy-ca")
        self.keda: Issued = self.client_ca.issue(KEDA_USER)


def answer(call: Awaitable[Any]) -> Awaitable[Any]:
    """`call`, or the AioRpcError it fails with (so tests compare outcomes, not control flow)."""

    async def run() -> Any:
        try:
            return await call
        except grpc.aio.AioRpcError as error:
            return error

    return run()


def reason(error: grpc.aio.AioRpcError) -> str:
    """The failure-table row of an error (`stale`, `no_targets`, ...), from the trailing metadata."""
    # grpc-stubs gives AioRpcError the sync RpcError's `tuple[_Metadatum, ...]`; grpcio's AioRpcError
    # returns a grpc.aio.Metadata mapping (or None when the server sent no trailers).
    metadata = cast("grpc.aio.Metadata | None", error.trailing_metadata())
    return str(metadata.get(REASON_KEY, "")) if metadata is not None else ""


def trigger(metric: str, namespace: str = "prod", selector: str = "", **extra: str) -> pb.ScaledObjectRef:
    """A ScaledObjectRef as KEDA sends it for an `external` trigger with this metadata."""
    metadata = {"scalerAddress": "vllm-autoscale:9443", "metric": metric, "target": "10", **extra}
    if selector:
        metadata["labelSelector"] = selector
    return pb.ScaledObjectRef(name="llama", namespace=namespace, scalerMetadata=metadata)


@dataclass
class Adapter:
    """A running adapter process, a gRPC stub and an HTTPS session presenting KEDA's certificate."""

    popen: subprocess.Popen[bytes]
    http_port: int
    keda_port: int
    log_path: Path
    pki: PKI
    channel: grpc.aio.Channel | None = None
    session: aiohttp.ClientSession | None = None

    @property
    def stub(self) -> Any:
        assert self.channel is not None
        return rpc.ExternalScalerStub(self.channel)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def http(self, metric: str, namespace: str = "prod", selector: str = "") -> tuple[int, Any]:
        """GET the metric over HTTPS as KEDA's user: (status, body)."""
        assert self.session is not None
        url = f"https://127.0.0.1:{self.http_port}{BASE}/namespaces/{namespace}/{metric}"
        async with self.session.get(url, params={"labelSelector": selector} if selector else {}) as response:
            return response.status, await response.json()

    async def http_value(self, metric: str, namespace: str = "prod", selector: str = "") -> float:
        status, body = await self.http(metric, namespace, selector)
        assert status == 200, body
        return parse_quantity(body["items"][0]["value"])

    async def get_metrics(self, ref: pb.ScaledObjectRef) -> Any:
        """GetMetrics for the trigger: the response, or the AioRpcError."""
        return await answer(self.stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref), timeout=10))

    async def same_value(
        self, metric: str, namespace: str, selector: str, within: float
    ) -> tuple[Any, float]:
        """GetMetrics and the HTTP API for one key, read back to back until both read the same refresh
        (a refresh between the two reads may change the value): (the gRPC MetricValue, the HTTP value)."""
        ref = trigger(metric, namespace, selector)

        async def read() -> tuple[Any, float] | None:
            before = await self.get_metrics(ref)
            http = await self.http_value(metric, namespace, selector)
            after = await self.get_metrics(ref)
            for grpc_answer in (before, after):
                assert not isinstance(grpc_answer, grpc.aio.AioRpcError), grpc_answer
                if grpc_answer.metricValues[0].metricValueFloat == http:
                    return grpc_answer.metricValues[0], http
            return None

        return await eventually(read, within, f"one refresh of {metric} read by both front ends")


def stub_of(channel: grpc.aio.Channel) -> Any:
    """The generated client stub over `channel`."""
    return rpc.ExternalScalerStub(channel)


def secure_channel(adapter_port: int, pki: PKI, client: Issued | None) -> grpc.aio.Channel:
    """A gRPC channel verifying the serving CA, presenting
    `client` when given (KEDA's TriggerAuthentication)."""
    credentials = grpc.ssl_channel_credentials(
        pki.serving_ca.cert_pem, client.key_pem if client else None, client.cert_pem if client else None
    )
    return grpc.aio.secure_channel(f"127.0.0.1:{adapter_port}", credentials)


@contextlib.asynccontextmanager
async def running_adapter(
    workdir: Path, pki: PKI, kube: FakeKubeAPI, config_text: str, *, mutual: bool, flags: tuple[str, ...] = ()
) -> AsyncIterator[Adapter]:
    """`python -m adapter serve --keda-port` over TLS (mutual with `mutual`); stopped and reaped on exit.

    Ready when `/readyz` answers 200 and the gRPC port accepts a handshake. Without `mutual` the HTTP
    side reads its client CA from the fake's extension-apiserver-authentication ConfigMap, and the
    gRPC port has no client CA (TLS only).
    """
    if not any(grant.subject == KEDA_USER for grant in kube.grants):
        kube.grants.append(Grant(KEDA_USER, verbs=("get", "list"), resources=("*",)))
    if not mutual:
        kube.config_map = {"client-ca-file": pki.client_ca.cert_pem.decode()}
    http_port, keda_port = free_port(), free_port()
    command = [
        sys.executable,
        "-m",
        "adapter",
        "serve",
        "--address",
        "127.0.0.1",
        "--port",
        str(http_port),
        "--keda-port",
        str(keda_port),
        "--tls-cert-file",
        str(pki.cert),
        "--tls-private-key-file",
        str(pki.key),
        "--requestheader-client-ca-file",
        str(pki.front_proxy_file),
        "--kubeconfig",
        str(kube.kubeconfig),
        "--log-format",
        "text",
        *flags,
    ]
    if mutual:
        command += ["--client-ca-file", str(pki.client_ca_file)]
    popen, log_path = _spawn(workdir, config_text, command)
    adapter = Adapter(popen, http_port, keda_port, log_path, pki)
    try:
        adapter.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=pki.keda.client_context(pki.serving_ca))
        )
        adapter.channel = secure_channel(keda_port, pki, pki.keda)

        async def ready() -> bool:
            if popen.poll() is not None:
                raise AssertionError(f"adapter exited with {popen.returncode}:\n{adapter.log()[-3000:]}")
            assert adapter.session is not None and adapter.channel is not None
            async with adapter.session.get(f"https://127.0.0.1:{http_port}/readyz") as response:
                if response.status != 200:
                    return False
            await asyncio.wait_for(adapter.channel.channel_ready(), 2)
            return True

        try:
            await eventually(ready, START_SECONDS, "the adapter's /readyz and gRPC port")
        except AssertionError as error:
            raise AssertionError(f"{error}\n{adapter.log()[-3000:]}") from None
        yield adapter
    finally:
        if adapter.channel is not None:
            await adapter.channel.close(None)  # no grace: no call is in flight
        if adapter.session is not None:
            await adapter.session.close()
        code = await stop(popen)
    # Reached only when the tests passed: SIGTERM must stop both front ends cleanly.
    log = adapter.log()
    assert code == 0 and "Traceback" not in log, f"adapter exited {code} on SIGTERM:\n{log[-3000:]}"


def _spawn(workdir: Path, config_text: str, command: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "config.yaml"
    config.write_text(config_text)
    log_path = workdir / "adapter.log"
    with log_path.open("wb") as log:
        popen = subprocess.Popen([*command, "--config", str(config)], stdout=log, stderr=subprocess.STDOUT)
    return popen, log_path


async def stop(popen: subprocess.Popen[bytes]) -> int:
    """SIGTERM, then SIGKILL after 10 s; reaps the process without blocking the event loop."""
    if popen.poll() is None:
        popen.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.to_thread(popen.wait), 10)
        except TimeoutError:
            popen.kill()
            await asyncio.to_thread(popen.wait, 5)
    return popen.returncode
