"""TLS serving: the server `SSLContext`, certificate reload, and the `--self-signed` certificate.

The listening socket keeps one `SSLContext` for its whole life. Reloading builds a complete new
context from the new files and switches each *new* handshake to it from the SNI callback (which
OpenSSL calls for every ClientHello, with or without a server name); connections already open keep
the certificate they were set up with, so a rotation drops nothing. A file pair that does not load
(half-written, key and certificate mismatched) is logged and the previous context stays in use.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from adapter.errors import CertificateError

log = logging.getLogger(__name__)

# TLS 1.2 suites with forward secrecy and AEAD only: the set Go (and so the kube-apiserver) prefers;
# TLS 1.3 suites are not configurable through this string and are all strong.
TLS12_CIPHERS: Final = "ECDHE+AESGCM:ECDHE+CHACHA20"
# A year: the in-memory certificate lives as long as the process, which is rarely more than weeks.
_SELF_SIGNED_DAYS: Final = 365


@dataclass(frozen=True)
class KeyPair:
    """A serving certificate chain and its private key, as PEM bytes."""

    cert_pem: bytes
    key_pem: bytes

    def fingerprint(self) -> str:
        """A digest of both halves: equal pairs have equal fingerprints."""
        return hashlib.sha256(self.cert_pem + b"\0" + self.key_pem).hexdigest()


def read_key_pair(cert_file: str, key_file: str) -> KeyPair:
    """Read a certificate and key file (blocking; call it in a thread from async code)."""
    try:
        return KeyPair(Path(cert_file).read_bytes(), Path(key_file).read_bytes())
    except OSError as exc:
        raise CertificateError(
            f"unable to read serving certificate {exc.filename!r}: {exc.strerror}"
        ) from exc


def server_context(pair: KeyPair, client_ca_pem: bytes = b"") -> ssl.SSLContext:
    """A server context with modern defaults serving `pair`.

    With `client_ca_pem`, a client certificate is requested but optional (bearer tokens and
    health probes need none); a certificate that is presented must chain to one of those CAs and
    be valid now, or the handshake fails. Which CA it chained to is for the authenticator to
    decide: OpenSSL does not say.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(TLS12_CIPHERS)
    # Renegotiation and compression have only ever been attack surface for an API server.
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION | ssl.OP_CIPHER_SERVER_PREFERENCE
    _load_pair(context, pair)
    if client_ca_pem.strip():
        try:
            context.load_verify_locations(cadata=client_ca_pem.decode("ascii"))
        except (ssl.SSLError, UnicodeDecodeError) as exc:
            raise CertificateError(f"unable to load client CA certificates: {exc}") from exc
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def _load_pair(context: ssl.SSLContext, pair: KeyPair) -> None:
    # `load_cert_chain` only reads paths. A memfd keeps the key off the disk (and works on a
    # read-only root filesystem); elsewhere a private temporary directory stands in.
    with _pem_path(pair.key_pem + b"\n" + pair.cert_pem) as path:
        try:
            context.load_cert_chain(path)
        except ssl.SSLError as exc:
            raise CertificateError(f"unable to load serving certificate: {exc.reason or exc}") from exc


@contextlib.contextmanager
def _pem_path(data: bytes) -> Iterator[str]:
    if hasattr(os, "memfd_create") and Path("/proc/self/fd").is_dir():
        fd = os.memfd_create("tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="vllm-autoscale-tls-") as directory:
        path = Path(directory) / "pair.pem"
        path.touch(mode=0o600)
        path.write_bytes(data)
        yield str(path)


def describe(pair: KeyPair) -> dict[str, str]:
    """Subject, DNS/IP names and expiry of the leaf certificate, for log lines."""
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = [*san.get_values_for_type(x509.DNSName), *map(str, san.get_values_for_type(x509.IPAddress))]
    except x509.ExtensionNotFound:
        names = []
    return {
        "subject": cert.subject.rfc4514_string(),
        "names": ",".join(names),
        "not_after": cert.not_valid_after_utc.isoformat(),
        "serial": format(cert.serial_number, "x"),
    }


def self_signed(hosts: tuple[str, ...] = ()) -> KeyPair:
    """A fresh self-signed serving certificate for `hosts` plus localhost and the host name.

    The key never leaves memory. Clients cannot verify it: it is for an APIService with
    `insecureSkipTLSVerify: true` and for local experiments, never for production.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    names = dict.fromkeys(("localhost", socket.gethostname(), "127.0.0.1", "::1", *hosts))
    alt_names: list[x509.GeneralName] = []
    for name in names:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt_names.append(x509.DNSName(name))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vllm-autoscale self-signed")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        # Back-dated so a client whose clock is a little behind still accepts it.
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=_SELF_SIGNED_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem)


class ServingContext:
    """The one `SSLContext` a server listens with, whose certificate and client CAs can be replaced.

    `context` is handed to the server once; `update` swaps what new handshakes use. Open
    connections are never touched.
    """

    def __init__(self, pair: KeyPair, client_ca_pem: bytes = b"") -> None:
        self.context = server_context(pair, client_ca_pem)
        self.context.sni_callback = self._select
        self._current = self.context
        self._fingerprint = self._fingerprint_of(pair, client_ca_pem)
        self.pair = pair

    @staticmethod
    def _fingerprint_of(pair: KeyPair, client_ca_pem: bytes) -> str:
        return hashlib.sha256(pair.fingerprint().encode() + client_ca_pem).hexdigest()

    def update(self, pair: KeyPair, client_ca_pem: bytes = b"") -> bool:
        """Use `pair` and `client_ca_pem` for new connections; `False` when nothing changed.

        Raises `CertificateError` (and keeps the previous material) when the new material does not load.
        """
        fingerprint = self._fingerprint_of(pair, client_ca_pem)
        if fingerprint == self._fingerprint:
            return False
        self._current = server_context(pair, client_ca_pem)
        self._fingerprint = fingerprint
        self.pair = pair
        return True

    def _select(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, context: ssl.SSLContext
    ) -> None:
        if self._current is not context:
            connection.context = self._current
