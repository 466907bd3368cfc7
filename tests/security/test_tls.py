"""`adapter.security.tls`: the serving context, certificate
reload and the self-signed certificate, with real handshakes."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509

from adapter.errors import CertificateError
from adapter.security import tls
from tests.certs import CA, Issued


def _pair(issued: Issued) -> tls.KeyPair:
    return tls.KeyPair(issued.cert_pem, issued.key_pem)


@contextlib.asynccontextmanager
async def listening(context: ssl.SSLContext) -> AsyncIterator[int]:
    """A TLS server on a free port that answers one line; stopped on exit."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            writer.write(b"ok\n")
            await writer.drain()
            await reader.read()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def handshake(port: int, client: ssl.SSLContext) -> tuple[x509.Certificate, str, str]:
    """Connect and return the served certificate, the protocol version and the cipher."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost")
    try:
        if await asyncio.wait_for(reader.readline(), 5) != b"ok\n":
            # With TLS 1.3 the client learns of a rejected certificate only when the server hangs up.
            raise ConnectionResetError("the server closed the connection without answering")
        ssl_object = writer.get_extra_info("ssl_object")
        served = x509.load_der_x509_certificate(ssl_object.getpeercert(binary_form=True))
        return served, ssl_object.version(), ssl_object.cipher()[0]
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()


@pytest.fixture
def ca() -> CA:
    return CA("serving-ca")


async def test_tls_1_1_clients_are_refused(ca: CA) -> None:
    """The minimum protocol is TLS 1.2, even for a client willing to go lower."""
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.check_hostname = False
    old.verify_mode = ssl.CERT_NONE
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old.minimum_version = ssl.TLSVersion.TLSv1_1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    async with listening(tls.server_context(_pair(ca.issue("s", server=True)))) as port:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await handshake(port, old)


async def test_tls_1_2_uses_forward_secret_aead_suites(ca: CA) -> None:
    """A TLS 1.2 client gets an ECDHE suite with AES-GCM or ChaCha20, never CBC or static RSA."""
    client = ca.client_context()
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    async with listening(tls.server_context(_pair(ca.issue("s", server=True)))) as port:
        _served, version, cipher = await handshake(port, client)
    assert version == "TLSv1.2"
    assert cipher.startswith("ECDHE-")
    assert "GCM" in cipher or "CHACHA20" in cipher


@pytest.mark.parametrize(
    ("client_cert", "accepted"),
    [
        pytest.param("none", True, id="no client certificate is allowed at the TLS layer"),
        pytest.param("client-ca", True, id="certificate from the client CA is accepted"),
        pytest.param("front-proxy-ca", True, id="certificate from the requestheader CA is accepted"),
        pytest.param("other-ca", False, id="certificate from another CA ends the handshake"),
        pytest.param("expired", False, id="expired certificate ends the handshake"),
        pytest.param("not-yet-valid", False, id="certificate not valid yet ends the handshake"),
    ],
)
async def test_client_certificates_are_optional_but_verified_against_the_union(
    ca: CA, client_cert: str, accepted: bool
) -> None:
    """The context asks for a client certificate, trusts both CAs, and rejects one it cannot verify."""
    client_ca, front_proxy_ca = CA("client-ca"), CA("front-proxy-ca")
    certificates = {
        "client-ca": client_ca.issue("alice"),
        "front-proxy-ca": front_proxy_ca.issue("front-proxy-client"),
        "other-ca": CA("other").issue("alice"),
        "expired": client_ca.issue("alice", expired=True),
        "not-yet-valid": client_ca.issue("alice", not_yet_valid=True),
    }
    context = tls.server_context(
        _pair(ca.issue("s", server=True)), client_ca.cert_pem + front_proxy_ca.cert_pem
    )
    client = certificates[client_cert].client_context(ca) if client_cert != "none" else ca.client_context()
    async with listening(context) as port:
        if accepted:
            served, _version, _cipher = await handshake(port, client)
            assert served.subject.rfc4514_string() == "CN=s"
        else:
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await handshake(port, client)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(
            lambda c: tls.KeyPair(c.issue("a", server=True).cert_pem, c.issue("b", server=True).key_pem),
            "unable to load serving certificate",
            id="key of another certificate is refused",
        ),
        pytest.param(
            lambda c: tls.KeyPair(b"not a certificate", c.issue("a", server=True).key_pem),
            "unable to load serving certificate",
            id="garbage certificate is refused",
        ),
    ],
)
def test_bad_key_pairs_are_refused_with_a_clear_message(ca: CA, make: object, message: str) -> None:
    """A pair that does not load raises `CertificateError` saying what could not be loaded."""
    assert callable(make)
    with pytest.raises(CertificateError, match=message):
        tls.server_context(make(ca))


def test_garbage_client_ca_is_refused(ca: CA) -> None:
    """A client CA bundle that is not PEM certificates is an error, not an empty trust store."""
    with pytest.raises(CertificateError, match="unable to load client CA certificates"):
        tls.server_context(_pair(ca.issue("s", server=True)), b"-----BEGIN CERTIFICATE-----\ngarbage\n")


def test_missing_certificate_file_is_named(tmp_path: Path) -> None:
    """Reading a pair names the file that is missing."""
    with pytest.raises(CertificateError, match=r"unable to read serving certificate '.*missing\.crt'"):
        tls.read_key_pair(str(tmp_path / "missing.crt"), str(tmp_path / "missing.key"))


async def test_update_switches_new_handshakes_and_keeps_open_connections(ca: CA) -> None:
    """After `update`, new connections get the new certificate; a connection made before keeps its own."""
    first, second = ca.issue("first", server=True), ca.issue("second", server=True)
    serving = tls.ServingContext(_pair(first))
    async with listening(serving.context) as port:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=ca.client_context(), server_hostname="localhost"
        )
        try:
            assert await reader.readline() == b"ok\n"
            assert serving.update(_pair(second)) is True
            served, _version, _cipher = await handshake(port, ca.client_context())
            assert served.serial_number == second.serial
            kept = x509.load_der_x509_certificate(writer.get_extra_info("ssl_object").getpeercert(True))
            assert kept.serial_number == first.serial
            writer.write(b"still there\n")
            await writer.drain()
            assert not writer.is_closing()
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()


async def test_update_with_bad_material_keeps_serving_the_old_certificate(ca: CA) -> None:
    """A half-rotated pair raises and leaves the previous certificate in use."""
    good = ca.issue("good", server=True)
    serving = tls.ServingContext(_pair(good))
    with pytest.raises(CertificateError):
        serving.update(tls.KeyPair(ca.issue("new", server=True).cert_pem, good.key_pem))
    async with listening(serving.context) as port:
        served, _version, _cipher = await handshake(port, ca.client_context())
    assert served.serial_number == good.serial


def test_update_with_the_same_material_changes_nothing(ca: CA) -> None:
    """Re-reading unchanged files is not a reload."""
    pair = _pair(ca.issue("s", server=True))
    serving = tls.ServingContext(pair)
    assert serving.update(tls.KeyPair(pair.cert_pem, pair.key_pem)) is False


async def test_self_signed_certificate_serves_localhost() -> None:
    """`self_signed()` makes a working serving certificate for localhost and 127.0.0.1, issued by itself."""
    pair = tls.self_signed(("adapter.monitoring.svc",))
    names = tls.describe(pair)["names"].split(",")
    assert {"localhost", "127.0.0.1", "adapter.monitoring.svc"} <= set(names)
    client = ssl.create_default_context()
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    async with listening(tls.server_context(pair)) as port:
        served, _version, _cipher = await handshake(port, client)
    assert served.issuer == served.subject
    assert served == x509.load_pem_x509_certificate(pair.cert_pem)
