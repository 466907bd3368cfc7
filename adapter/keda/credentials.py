"""TLS for the gRPC port: the adapter's serving certificate, and mutual TLS when a client CA is set.

gRPC does its TLS in C, not with Python's `ssl`, so the `SSLContext` of the HTTP side cannot be
shared. Instead gRPC asks `ScalerCredentials.fetch` before each new handshake whether the
certificate changed; it answers from the serving certificate the HTTP side currently uses (so a
rotation reaches both ports together) and from the client CA file, which `watch` re-reads. Open
connections keep what they were set up with.

Who may call is decided by the client CA alone: with `--client-ca-file`, a client must present a
certificate it issued (KEDA's `tlsClientCert`), and any such client may read any metric in any
namespace. Without it the port is TLS only and anyone who can reach it may read metric values.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import grpc
from cryptography import x509

from adapter.errors import ConfigError
from adapter.security.tls import KeyPair

log = logging.getLogger(__name__)


class ScalerCredentials:
    """gRPC server credentials that follow the serving certificate and the client CA file."""

    def __init__(self, pair: Callable[[], KeyPair], client_ca_file: str | None, client_ca_pem: bytes) -> None:
        self._pair = pair
        self.client_ca_file = client_ca_file
        self._client_ca_pem = client_ca_pem
        # What gRPC holds now: `fetch` answers "unchanged" (None) until this differs from the current.
        self._held = (pair(), client_ca_pem)

    @property
    def mutual(self) -> bool:
        """Whether clients must present a certificate from the client CA."""
        return self.client_ca_file is not None

    @classmethod
    async def load(cls, pair: Callable[[], KeyPair], client_ca_file: str | None) -> ScalerCredentials:
        """Read the client CA file (if any); `ConfigError` when it is unreadable or holds no certificate."""
        pem = b""
        if client_ca_file is not None:
            try:
                pem = await asyncio.to_thread(_read_ca, client_ca_file)
            except ValueError as exc:
                raise ConfigError(str(exc)) from exc
        return cls(pair, client_ca_file, pem)

    def server_credentials(self) -> grpc.ServerCredentials:
        """Credentials for `add_secure_port`, consulting `fetch` before each handshake."""
        return grpc.dynamic_ssl_server_credentials(
            self._configuration(*self._held),
            self.fetch,  # type: ignore[arg-type]  # the stubs omit that None means "unchanged"
            require_client_authentication=self.mutual,
        )

    def _configuration(self, pair: KeyPair, client_ca_pem: bytes) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration(
            [(pair.key_pem, pair.cert_pem)], root_certificates=client_ca_pem if self.mutual else None
        )

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """The new configuration when the certificate or client CA changed since last asked, else `None`.

        Called by gRPC's own threads, never on the event loop: it only reads attributes.
        """
        current = (self._pair(), self._client_ca_pem)
        if current == self._held:
            return None
        self._held = current
        log.info("gRPC serving certificate or client CA reloaded")
        return self._configuration(*current)

    async def refresh(self) -> bool:
        """Re-read the client CA file; `True` when it changed. A file that fails to load is logged and
        the current CA kept: a half-written bundle must not lock every client out."""
        if self.client_ca_file is None:
            return False
        try:
            pem = await asyncio.to_thread(_read_ca, self.client_ca_file)
        except ValueError as exc:
            log.error("unable to reload the KEDA client CA; keeping the current one: %s", exc)
            return False
        if pem == self._client_ca_pem:
            return False
        self._client_ca_pem = pem
        return True

    async def watch(self, interval: float) -> None:
        """`refresh` every `interval` seconds until cancelled; no failure ends the loop."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.refresh()
            except Exception:
                log.exception("unexpected error reloading the KEDA client CA")


def _read_ca(path: str) -> bytes:
    try:
        pem = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"unable to read client CA file {path!r}: {exc.strerror}") from exc
    try:
        if not x509.load_pem_x509_certificates(pem):
            raise ValueError("no certificate")
    except ValueError as exc:
        raise ValueError(f"client CA file {path!r} holds no PEM certificate: {exc}") from exc
    return pem
