"""TLS and mutual TLS on the gRPC port, with real certificates and a real grpcio client.

The servicer is the real one over the real application (tests/keda/conftest.py); only the
credentials differ between tests. Certificates come from tests/certs.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from adapter.errors import ConfigError
from adapter.keda import externalscaler_pb2_grpc as rpc
from adapter.keda.credentials import ScalerCredentials
from adapter.keda.servicer import ExternalScaler
from adapter.keda.serving import serve_scaler
from adapter.security.tls import KeyPair
from tests.certs import CA, Issued
from tests.keda.conftest import MakeKeda, ref

QUESTION = ref(metric="vllm_requests_waiting", target="1")


def pair_of(issued: Issued) -> KeyPair:
    return KeyPair(issued.cert_pem, issued.key_pem)


async def is_active(port: int, trust: CA, client: Issued | None = None) -> bool | grpc.StatusCode:
    """One IsActive over a fresh TLS connection: the answer, or the status code of the failure."""
    credentials = grpc.ssl_channel_credentials(
        trust.cert_pem, client.key_pem if client else None, client.cert_pem if client else None
    )
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials) as channel:
        try:
            answer = await rpc.ExternalScalerStub(channel).IsActive(QUESTION, timeout=10)
        except grpc.aio.AioRpcError as error:
            return error.code()
        return bool(answer.result)


class Served:
    """The serving certificate the HTTP side would hold (`SecureServing.serving.pair`), swappable."""

    def __init__(self, pair: KeyPair) -> None:
        self.pair = pair


@contextlib.asynccontextmanager
async def tls_scaler(scaler: ExternalScaler, credentials: ScalerCredentials) -> AsyncIterator[int]:
    async with serve_scaler(scaler, "127.0.0.1", 0, credentials.server_credentials()) as port:
        yield port


async def test_tls_without_a_client_ca_serves_any_client_that_trusts_the_certificate(
    make_keda: MakeKeda, tmp_path: Path
) -> None:
    """Without a client CA the port is server-authenticated TLS: a client verifying the serving CA is
    answered with or without a certificate; a client trusting another CA fails its handshake."""
    keda = await make_keda()
    serving_ca, other = CA("serving"), CA("other")
    served = Served(pair_of(serving_ca.issue("adapter", server=True)))
    credentials = await ScalerCredentials.load(lambda: served.pair, None)
    assert not credentials.mutual
    async with tls_scaler(keda.scaler, credentials) as port:
        assert await is_active(port, serving_ca) is True
        assert await is_active(port, serving_ca, CA("anyone").issue("keda")) is True
        assert await is_active(port, other) == grpc.StatusCode.UNAVAILABLE


async def test_mutual_tls_admits_exactly_the_client_ca(make_keda: MakeKeda, tmp_path: Path) -> None:
    """With a client CA, only a valid certificate it issued gets an answer; no certificate, another
    CA's, or an expired one fails in the handshake (UNAVAILABLE), before any RPC runs."""
    keda = await make_keda()
    serving_ca, client_ca, stranger_ca = CA("serving"), CA("keda-clients"), CA("stranger")
    served = Served(pair_of(serving_ca.issue("adapter", server=True)))
    credentials = await ScalerCredentials.load(
        lambda: served.pair, str(client_ca.write(tmp_path, "client-ca"))
    )
    assert credentials.mutual
    async with tls_scaler(keda.scaler, credentials) as port:
        assert await is_active(port, serving_ca, client_ca.issue("keda-operator")) is True
        assert await is_active(port, serving_ca) == grpc.StatusCode.UNAVAILABLE
        assert (
            await is_active(port, serving_ca, stranger_ca.issue("keda-operator"))
            == grpc.StatusCode.UNAVAILABLE
        )
        expired = client_ca.issue("keda-operator", expired=True)
        assert await is_active(port, serving_ca, expired) == grpc.StatusCode.UNAVAILABLE
    assert keda.calls("IsActive", "OK") == 1, "refused handshakes never reach the servicer"


async def test_rotated_serving_certificate_and_client_ca_apply_to_new_connections(
    make_keda: MakeKeda, tmp_path: Path
) -> None:
    """A new serving certificate (as the HTTP side reloads it) and a rewritten client CA file are used
    from the next handshake on, without a restart."""
    keda = await make_keda()
    old_ca, new_ca = CA("serving-1"), CA("serving-2")
    old_clients, new_clients = CA("clients-1"), CA("clients-2")
    served = Served(pair_of(old_ca.issue("adapter", server=True)))
    ca_file = old_clients.write(tmp_path, "client-ca")
    credentials = await ScalerCredentials.load(lambda: served.pair, str(ca_file))
    async with tls_scaler(keda.scaler, credentials) as port:
        assert await is_active(port, old_ca, old_clients.issue("keda")) is True

        served.pair = pair_of(new_ca.issue("adapter", server=True))
        assert await is_active(port, new_ca, old_clients.issue("keda")) is True
        assert await is_active(port, old_ca, old_clients.issue("keda")) == grpc.StatusCode.UNAVAILABLE

        new_clients.write(tmp_path, "client-ca")
        assert await credentials.refresh() is True
        assert await is_active(port, new_ca, new_clients.issue("keda")) is True
        assert await is_active(port, new_ca, old_clients.issue("keda")) == grpc.StatusCode.UNAVAILABLE


async def test_a_broken_client_ca_file_is_refused_at_start_and_kept_out_on_reload(
    make_keda: MakeKeda, tmp_path: Path
) -> None:
    """An unreadable or certificate-less CA file is a ConfigError at start; on reload it is logged and
    the CA in use stays, so a half-written file cannot lock KEDA out."""
    keda = await make_keda()
    serving_ca, clients = CA("serving"), CA("clients")
    served = Served(pair_of(serving_ca.issue("adapter", server=True)))
    with pytest.raises(ConfigError, match="unable to read client CA file"):
        await ScalerCredentials.load(lambda: served.pair, str(tmp_path / "missing.crt"))
    (tmp_path / "junk.crt").write_text("not a certificate")
    with pytest.raises(ConfigError, match="holds no PEM certificate"):
        await ScalerCredentials.load(lambda: served.pair, str(tmp_path / "junk.crt"))

    ca_file = clients.write(tmp_path, "client-ca")
    credentials = await ScalerCredentials.load(lambda: served.pair, str(ca_file))
    async with tls_scaler(keda.scaler, credentials) as port:
        ca_file.write_text("-----BEGIN CERTIFICATE-----\ntruncated")
        assert await credentials.refresh() is False
        assert await is_active(port, serving_ca, clients.issue("keda")) is True
