"""The chart's KEDA wiring, end to end: a real `vllm-autoscale serve` process started with the rendered
command line, ConfigMap and mounted Secrets of the keda-scaler scenario, called by a real gRPC client
holding exactly what the TriggerAuthentication gives KEDA (caCert, tlsClientCert, tlsClientKey) and
verifying the adapter under the host name of each trigger's scalerAddress, as KEDA does.

The adapter's HTTP side needs a kube-apiserver for its authentication settings; `FakeKubeAPI` stands in
for it (no kube-apiserver can run here). Prometheus is deliberately unreachable: `GetMetricSpec` needs
no source, and `IsActive` must then be an UNAVAILABLE error, never a value.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from adapter.keda import externalscaler_pb2 as pb
from adapter.keda import metadata as scaler_metadata
from tests.certs import CA
from tests.helm.conftest import ADAPTER, NAMESPACE, Rendered, container, mounted_files
from tests.integration.procs import free_port
from tests.keda.harness import stop, stub_of
from tests.kubeapi_fake import FakeKubeAPI
from tests.waiting import eventually

pytestmark = pytest.mark.integration

SCENARIO = "keda-scaler"
START_SECONDS = 60.0


def _secret(result: Rendered, name: str, key: str) -> bytes:
    return base64.b64decode(result.one("Secret", name)["data"][key])


def _keda_material(result: Rendered) -> dict[str, bytes]:
    """What KEDA reads through the TriggerAuthentication, by parameter."""
    refs = result.one("TriggerAuthentication", ADAPTER)["spec"]["secretTargetRef"]
    return {ref["parameter"]: _secret(result, ref["name"], ref["key"]) for ref in refs}


@contextlib.asynccontextmanager
async def _adapter(
    result: Rendered, tmp: Path, kube: FakeKubeAPI
) -> AsyncIterator[tuple[int, subprocess.Popen[bytes], Path]]:
    """The adapter as the chart runs it (rendered args, config and Secrets, only the ports and the
    cluster moved to this machine); yields its gRPC port, process and log; stops and reaps it on exit."""
    args: list[str] = container(result.one("Deployment", ADAPTER), "adapter")["args"]
    for mount, directory in mounted_files(result, tmp / "mounts").items():
        args = [arg.replace(f"={mount}/", f"={directory}/") for arg in args]
    config = tmp / "config.yaml"
    text = result.one("ConfigMap", ADAPTER)["data"]["config.yaml"]
    config.write_text(
        text.replace("kube-prometheus-stack-prometheus.monitoring.svc:9090", f"127.0.0.1:{free_port()}")
    )
    args = [f"--config={config}" if arg.startswith("--config=") else arg for arg in args]
    front_proxy = CA("front-proxy").write(tmp, "front-proxy-ca")
    http_port, grpc_port = free_port(), free_port()
    command = [
        sys.executable,
        "-m",
        "adapter",
        *args,
        "--address",
        "127.0.0.1",
        "--port",
        str(http_port),
        f"--keda-port={grpc_port}",
        "--requestheader-client-ca-file",
        str(front_proxy),
        "--kubeconfig",
        str(kube.kubeconfig),
        "--log-format",
        "text",
    ]
    log_path = tmp / "adapter.log"
    popen = _spawn(command, log_path)
    try:
        yield grpc_port, popen, log_path
    finally:
        code = await stop(popen)
        log_text = log_path.read_text(errors="replace")
    assert code == 0 and "Traceback" not in log_text, f"adapter exited {code}:\n{log_text[-3000:]}"


def _spawn(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start `command` with its output in `log_path` (Popen returns at once; `stop` reaps it)."""
    with log_path.open("wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def _channel(port: int, host: str, root: bytes, key: bytes | None, cert: bytes | None) -> grpc.aio.Channel:
    """A channel to the local port that verifies the adapter as `host`, the scalerAddress KEDA dials."""
    credentials = grpc.ssl_channel_credentials(root, key, cert)
    options = [("grpc.ssl_target_name_override", host), ("grpc.default_authority", host)]
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options=options)


async def _call(channel: grpc.aio.Channel, method: str, ref: pb.ScaledObjectRef) -> Any:
    try:
        return await getattr(stub_of(channel), method)(ref, timeout=10)
    except grpc.aio.AioRpcError as error:
        return error


async def test_keda_reaches_the_adapter_with_the_charts_material(
    rendered: dict[str, Rendered], tmp_path: Path
) -> None:
    """With the TriggerAuthentication's material every trigger's GetMetricSpec answers its metric and
    target over mutual TLS; without KEDA's certificate, or with one from another CA, the handshake fails;
    IsActive with Prometheus down is UNAVAILABLE."""
    result = rendered[SCENARIO]
    material = _keda_material(result)
    triggers = [t for s in result.find("ScaledObject") for t in s["spec"]["triggers"]]
    host = triggers[0]["metadata"]["scalerAddress"].rsplit(":", 1)[0]
    stranger = CA("not-keda").issue("keda-operator")
    (tmp_path / "kube").mkdir()
    async with FakeKubeAPI.running(tmp_path / "kube") as kube, _adapter(result, tmp_path, kube) as running:
        port, popen, log_path = running
        keda = _channel(port, host, material["caCert"], material["tlsClientKey"], material["tlsClientCert"])
        anonymous = _channel(port, host, material["caCert"], None, None)
        impostor = _channel(port, host, material["caCert"], stranger.key_pem, stranger.cert_pem)
        try:

            async def ready() -> bool:
                if popen.poll() is not None:
                    raise AssertionError(
                        f"adapter exited {popen.returncode}:\n{log_path.read_text()[-3000:]}"
                    )
                await asyncio.wait_for(keda.channel_ready(), 2)
                return True

            await eventually(ready, START_SECONDS, "the adapter's gRPC port")
            for trigger in triggers:
                meta = trigger["metadata"]
                ref = pb.ScaledObjectRef(name="so", namespace=NAMESPACE, scalerMetadata=meta)
                answer = await _call(keda, "GetMetricSpec", ref)
                assert not isinstance(answer, grpc.aio.AioRpcError), answer
                (spec,) = answer.metricSpecs
                query = scaler_metadata.parse(NAMESPACE, meta)
                assert (spec.metricName, spec.targetSizeFloat) == (meta["metric"], query.target)
                for outsider in (anonymous, impostor):
                    refused = await _call(outsider, "GetMetricSpec", ref)
                    assert isinstance(refused, grpc.aio.AioRpcError)
                    assert refused.code() == grpc.StatusCode.UNAVAILABLE
            down = await _call(
                keda,
                "IsActive",
                pb.ScaledObjectRef(name="so", namespace=NAMESPACE, scalerMetadata=triggers[0]["metadata"]),
            )
            assert isinstance(down, grpc.aio.AioRpcError) and down.code() == grpc.StatusCode.UNAVAILABLE
        finally:
            for channel in (keda, anonymous, impostor):
                await channel.close(None)
