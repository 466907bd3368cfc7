"""Client-certificate chains: does this leaf chain to that CA bundle, and is it valid now?

The TLS layer trusts the union of the client CA and the requestheader CA (OpenSSL only says "it
chained to one of them"), so each certificate authenticator verifies the leaf again against its own
bundle alone, at the time of every request: a keep-alive connection or a resumed TLS session whose
certificate has since expired, or whose CA has been rotated out, is not accepted any more.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from cryptography import x509
from cryptography.x509 import verification
from cryptography.x509.oid import ExtendedKeyUsageOID

log = logging.getLogger(__name__)


def load_certificates(pem: bytes, what: str) -> tuple[x509.Certificate, ...]:
    """Every certificate in a PEM bundle; `ValueError` names `what` when there is none or it is garbage."""
    try:
        certificates = tuple(x509.load_pem_x509_certificates(pem))
    except ValueError as exc:
        raise ValueError(f"unable to parse {what}: {exc}") from exc
    return certificates


def _require_ca(
    policy: verification.Policy, cert: x509.Certificate, value: x509.BasicConstraints | None
) -> None:
    if value is None or not value.ca:
        raise ValueError("issuer is not a CA")


def _require_client_usage(
    policy: verification.Policy, cert: x509.Certificate, value: x509.ExtendedKeyUsage | None
) -> None:
    # As Go's x509 (and so the kube-apiserver): a leaf without the extension may be used for anything.
    if value is not None and not {
        ExtendedKeyUsageOID.CLIENT_AUTH,
        ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE,
    } & set(value):
        raise ValueError("certificate is not for client authentication")


class CertificateAuthority:
    """Verifies that a client certificate chains to one particular CA bundle.

    The checks are the kube-apiserver's (signature, validity period, CA flag, client-auth usage),
    not the stricter Web PKI profile: cluster CAs and front-proxy certificates carry no SAN, and CAs
    made with `openssl req -x509` mark basicConstraints non-critical. Intermediates are not handed
    to us by the TLS layer, so a bundle must contain the certificate that issued the leaf.
    """

    def __init__(self, certificates: tuple[x509.Certificate, ...], name: str) -> None:
        if not certificates:
            raise ValueError(f"{name} must hold at least one certificate")
        self.name = name
        self._store = verification.Store(list(certificates))
        self._ca_policy = verification.ExtensionPolicy.permit_all().require_present(
            x509.BasicConstraints, verification.Criticality.AGNOSTIC, _require_ca
        )
        self._leaf_policy = verification.ExtensionPolicy.permit_all().may_be_present(
            x509.ExtendedKeyUsage, verification.Criticality.AGNOSTIC, _require_client_usage
        )

    @classmethod
    def from_pem(cls, pem: bytes, name: str) -> CertificateAuthority:
        """The authority of a PEM bundle; `ValueError` names `name` when it holds no certificate."""
        return cls(load_certificates(pem, name), name)

    def verifies(self, leaf: x509.Certificate, now: datetime | None = None) -> bool:
        """Whether `leaf` chains to this bundle and is valid (not expired, not yet valid) at `now`."""
        verifier = (
            verification.PolicyBuilder()
            .store(self._store)
            .time(now or datetime.now(UTC))
            .extension_policies(ca_policy=self._ca_policy, ee_policy=self._leaf_policy)
            .build_client_verifier()
        )
        try:
            verifier.verify(leaf, [])
        except verification.VerificationError as exc:
            log.debug("client certificate does not verify against %s: %s", self.name, exc)
            return False
        return True
