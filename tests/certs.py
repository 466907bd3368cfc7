"""Real X.509 certificate authorities and certificates for the secure-serving tests.

EC P-256 keys: generating one takes microseconds, so every test can afford its own PKI.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @property
    def serial(self) -> int:
        return self.cert.serial_number

    def write(self, directory: Path, name: str) -> tuple[Path, Path]:
        """Write `<name>.crt` and `<name>.key`; return their paths."""
        cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
        cert_path.write_bytes(self.cert_pem)
        key_path.write_bytes(self.key_pem)
        return cert_path, key_path

    def client_context(self, trust: CA) -> ssl.SSLContext:
        """A client context presenting this certificate and verifying servers against `trust`."""
        context = trust.client_context()
        with tempfile.TemporaryDirectory() as directory:
            cert_path, key_path = self.write(Path(directory), "client")
            context.load_cert_chain(cert_path, key_path)
        return context


class CA:
    """A self-signed certificate authority that issues server and client certificates."""

    def __init__(self, cn: str, *, minimal: bool = False) -> None:
        """A CA; `minimal` makes one as `openssl req -x509`
        does: basicConstraints non-critical, no keyUsage."""
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(_name(cn))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=not minimal)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
        )
        if not minimal:
            builder = builder.add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
        self.cert = builder.sign(self.key, hashes.SHA256())

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write(self, directory: Path, name: str) -> Path:
        """Write the CA certificate as `<name>.crt`."""
        path = directory / f"{name}.crt"
        path.write_bytes(self.cert_pem)
        return path

    def issue(
        self,
        cn: str,
        organizations: tuple[str, ...] = (),
        *,
        server: bool = False,
        expired: bool = False,
        not_yet_valid: bool = False,
        usages: tuple[x509.ObjectIdentifier, ...] | None = None,
    ) -> Issued:
        """A leaf for client authentication, or (with `server`) for localhost/127.0.0.1/::1.

        `expired` ended an hour ago; `not_yet_valid` starts in an hour. `usages` overrides the
        extended key usages; `()` leaves the extension out.
        """
        if usages is None:
            usages = (ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH,)
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        not_after = now - dt.timedelta(hours=1) if expired else now + dt.timedelta(days=1)
        if not_yet_valid:
            not_after = now + dt.timedelta(days=2, hours=1)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, organizations))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_after - dt.timedelta(days=2))
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        if server:
            names: list[x509.GeneralName] = [
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.IPAddress(ipaddress.ip_address("::1")),
            ]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return Issued(builder.sign(self.key, hashes.SHA256()), key)

    def client_context(self) -> ssl.SSLContext:
        """A client context that verifies servers against this CA and presents no certificate."""
        return ssl.create_default_context(cadata=self.cert_pem.decode())
