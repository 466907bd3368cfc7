"""`serve --keda-port`: the external scaler beside the HTTP API in one process and event loop.

The adapter runs in-process through `server.serve_config` (flags parsed by the real parser) on free
ports with a FakeSource; the secure case uses real certificates and `tests.kubeapi_fake.FakeKubeAPI`
for the HTTP side's SubjectAccessReview (no kube-apiserver can run here).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest

from adapter import cli, server
from adapter.config import Config, load, load_file
from adapter.errors import ConfigError
from adapter.flags import serve_overrides
from adapter.keda import externalscaler_pb2 as pb
from adapter.keda import externalscaler_pb2_grpc as rpc
from adapter.sources import Sample
from adapter.vocabulary.quantity import parse_quantity
from tests.certs import CA
from tests.fakes import FakeSource
from tests.keda.conftest import ref
from tests.kubeapi_fake import FakeKubeAPI, Grant
from tests.waiting import eventually

DEADLINE_SECONDS = 10.0
PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/prod/vllm_requests_waiting"


@dataclasses.dataclass
class Running:
    http_port: int
    keda_port: int
    stop: asyncio.Event
    task: asyncio.Task[None]


Start = Callable[..., Awaitable[Running]]


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """Run `serve_config` with a KEDA port; every adapter is stopped and awaited in teardown."""
    running: list[Running] = []

    async def run(config: Config, source: FakeSource) -> Running:
        config = dataclasses.replace(config, server=dataclasses.replace(config.server, port=0))
        loop = asyncio.get_running_loop()
        http: asyncio.Future[int] = loop.create_future()
        keda: asyncio.Future[int] = loop.create_future()
        stop = asyncio.Event()
        task = asyncio.create_task(
            server.serve_config(
                config, stop, source=source, on_bound=http.set_result, keda=server.Keda(0, keda.set_result)
            )
        )
        # Future[Any]: asyncio.wait's own bound, as the two futures' results differ (int, None)
        first: set[asyncio.Future[Any]] = {http, task}
        await asyncio.wait(first, timeout=DEADLINE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
        adapter = Running(http.result(), keda.result(), stop, task)
        running.append(adapter)
        return adapter

    yield run
    for adapter in running:
        adapter.stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(adapter.task, DEADLINE_SECONDS)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(
            ["--keda-port", "70000"], "--keda-port 70000 must be a TCP port", id="port out of range"
        ),
        pytest.param(
            ["--keda-port", "6443", "--port", "6443"], "must differ from the HTTP port", id="same as HTTP"
        ),
    ],
)
def test_unusable_keda_ports_are_config_errors(flags: list[str], message: str) -> None:
    """A KEDA port that cannot work is refused before anything starts, naming the flag."""
    args = cli.build_parser().parse_args(["serve", "--insecure-serving", *flags])
    config = load_file(None, serve_overrides(args))
    with pytest.raises(ConfigError, match=message):
        server.check_keda(config, server.Keda(args.keda_port))


def test_keda_port_is_off_unless_asked_for() -> None:
    """Without --keda-port nothing but HTTP is served."""
    assert cli.build_parser().parse_args(["serve"]).keda_port is None
    assert cli.build_parser().parse_args(["serve", "--keda-port", "9443"]).keda_port == 9443


async def test_insecure_loopback_serves_both_and_shutdown_closes_streams_cleanly(start: Start) -> None:
    """With --insecure-serving both front ends answer plainly on loopback from one cache; on stop, an
    open StreamIsActive ends with status OK (KEDA reconnects at once) and the server returns promptly."""
    config = load("server: {insecure_serving: true}\nlogging: {level: warning}")
    fake = FakeSource({"vllm_requests_waiting": lambda *_: Sample(3.0, time.time(), 1)})
    adapter = await start(config, fake)
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{adapter.http_port}{PATH}") as response,
    ):
        http_value = parse_quantity((await response.json())["items"][0]["value"])
    async with grpc.aio.insecure_channel(f"127.0.0.1:{adapter.keda_port}") as channel:
        stub = rpc.ExternalScalerStub(channel)
        request = pb.GetMetricsRequest(scaledObjectRef=ref(metric="vllm_requests_waiting", target="1"))
        assert (await stub.GetMetrics(request)).metricValues[0].metricValueFloat == http_value == 3.0
        assert len(fake.fetches) == 1, "one cache behind both front ends"
        stream = stub.StreamIsActive(ref(metric="vllm_requests_waiting", target="1"))
        assert (await stream.read()).result is True
        started = time.monotonic()
        adapter.stop.set()
        # grpc-stubs 1.53 omits grpc.aio.EOF, the sentinel grpcio's aio calls return at the end of a stream
        assert await stream.read() is grpc.aio.EOF  # type: ignore[attr-defined]
        assert await stream.code() == grpc.StatusCode.OK
    await asyncio.wait_for(adapter.task, DEADLINE_SECONDS)
    assert time.monotonic() - started < 5.0


async def test_insecure_serving_refuses_a_non_loopback_address() -> None:
    """Plain gRPC, like plain HTTP, binds loopback only (the HTTP check covers both ports)."""
    config = load("server: {insecure_serving: true, address: 0.0.0.0}")
    with pytest.raises(ConfigError, match="binds only loopback"):
        await server.serve_config(config, asyncio.Event(), source=FakeSource(), keda=server.Keda(0))


async def test_mutual_tls_with_the_serving_certificate_and_the_client_ca(
    start: Start, tmp_path: Path
) -> None:
    """Secure serving: the gRPC port presents the HTTP side's serving certificate and, with
    --client-ca-file, requires a client certificate from that CA. The same value comes back over both
    front ends for the same key (HTTP after a SubjectAccessReview for the certificate's user)."""
    serving_ca, clients, front_proxy = CA("serving"), CA("clients"), CA("front-proxy")
    cert, key = serving_ca.issue("adapter", server=True).write(tmp_path, "serving")
    async with FakeKubeAPI.running(tmp_path) as kube:
        kube.grants.append(Grant("keda-operator", resources=("vllm_requests_waiting",), namespaces=("prod",)))
        args = cli.build_parser().parse_args(
            [
                "serve",
                "--address",
                "127.0.0.1",
                "--tls-cert-file",
                str(cert),
                "--tls-private-key-file",
                str(key),
                "--client-ca-file",
                str(clients.write(tmp_path, "clients")),
                "--requestheader-client-ca-file",
                str(front_proxy.write(tmp_path, "front-proxy")),
                "--kubeconfig",
                str(kube.kubeconfig),
                "--log-level",
                "warning",
            ]
        )
        config = load_file(None, serve_overrides(args))
        fake = FakeSource({"vllm_requests_waiting": lambda *_: Sample(0.7304, time.time(), 1)})
        adapter = await start(config, fake)
        keda = clients.issue("keda-operator")
        context = keda.client_context(serving_ca)
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
            session.get(f"https://127.0.0.1:{adapter.http_port}{PATH}") as response,
        ):
            body: Any = await response.json()
            assert response.status == 200, body
        credentials = grpc.ssl_channel_credentials(serving_ca.cert_pem, keda.key_pem, keda.cert_pem)
        async with grpc.aio.secure_channel(f"127.0.0.1:{adapter.keda_port}", credentials) as channel:
            request = pb.GetMetricsRequest(scaledObjectRef=ref(metric="vllm_requests_waiting", target="1"))
            answer = await rpc.ExternalScalerStub(channel).GetMetrics(request)
        assert answer.metricValues[0].metricValueFloat == parse_quantity(body["items"][0]["value"]) == 0.73
        async with grpc.aio.secure_channel(
            f"127.0.0.1:{adapter.keda_port}", grpc.ssl_channel_credentials(serving_ca.cert_pem)
        ) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await rpc.ExternalScalerStub(channel).GetMetrics(request, timeout=DEADLINE_SECONDS)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, "no client certificate, no handshake"


async def test_rotated_certificate_files_reach_the_grpc_port(start: Start, tmp_path: Path) -> None:
    """When the serving certificate files and the client CA file are rewritten (cert-manager renews
    them in place), new gRPC connections get the new certificate and the new client CA, without a
    restart: the gRPC port follows the certificate the HTTP side reloads."""
    old_ca, new_ca = CA("serving-1"), CA("serving-2")
    old_clients, new_clients = CA("clients-1"), CA("clients-2")
    cert, key = old_ca.issue("adapter", server=True).write(tmp_path, "serving")
    clients_file = old_clients.write(tmp_path, "clients")
    async with FakeKubeAPI.running(tmp_path) as kube:
        config_file = tmp_path / "config.yaml"
        config_file.write_text("security: {tls_reload_interval: 50ms}\nlogging: {level: warning}\n")
        args = cli.build_parser().parse_args(
            [
                "serve",
                "--config",
                str(config_file),
                "--address",
                "127.0.0.1",
                "--tls-cert-file",
                str(cert),
                "--tls-private-key-file",
                str(key),
                "--client-ca-file",
                str(clients_file),
                "--requestheader-client-ca-file",
                str(CA("front-proxy").write(tmp_path, "front-proxy")),
                "--kubeconfig",
                str(kube.kubeconfig),
            ]
        )
        adapter = await start(load_file(args.config, serve_overrides(args)), FakeSource())
        request = ref(metric="vllm_requests_waiting", target="1")

        async def active(trust: CA, client: CA) -> bool:
            issued = client.issue("keda-operator")
            credentials = grpc.ssl_channel_credentials(trust.cert_pem, issued.key_pem, issued.cert_pem)
            async with grpc.aio.secure_channel(f"127.0.0.1:{adapter.keda_port}", credentials) as channel:
                try:
                    return bool((await rpc.ExternalScalerStub(channel).IsActive(request, timeout=5)).result)
                except grpc.aio.AioRpcError:
                    return False

        assert await active(old_ca, old_clients)
        new_ca.issue("adapter", server=True).write(tmp_path, "serving")
        new_clients.write(tmp_path, "clients")
        await eventually(
            functools.partial(active, new_ca, new_clients),
            within=DEADLINE_SECONDS,
            what="the gRPC port to take the new certificate and client CA",
            interval=0.05,
        )
        assert not await active(old_ca, old_clients), "new connections no longer get the old material"
