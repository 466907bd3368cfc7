"""`adapter.security.certauth`: which client certificates a CA bundle vouches for, decided as Go's
x509 verification does (chain, validity now, extended key usage).

Certificates are real (made by `tests.certs`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID

from adapter.security.certauth import CertificateAuthority, load_certificates
from tests.certs import CA, Issued


@pytest.mark.parametrize(
    ("make", "verifies"),
    [
        pytest.param(lambda ca: ca.issue("alice"), True, id="client certificate of the CA verifies"),
        pytest.param(lambda ca: CA("other").issue("alice"), False, id="certificate of another CA does not"),
        pytest.param(lambda ca: ca.issue("alice", expired=True), False, id="expired certificate does not"),
        pytest.param(
            lambda ca: ca.issue("alice", not_yet_valid=True), False, id="certificate not valid yet does not"
        ),
        pytest.param(
            lambda ca: ca.issue(
                "alice",
                server=True,
                usages=(ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH),
            ),
            True,
            id="certificate for server and client authentication verifies",
        ),
        pytest.param(
            lambda ca: ca.issue("web", server=True),
            False,
            id="certificate for server authentication only does not",
        ),
        pytest.param(
            lambda ca: ca.issue("alice", usages=()),
            True,
            id="certificate without extended key usage verifies, as in Go",
        ),
        pytest.param(
            lambda ca: ca.issue("alice", usages=(ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE,)),
            True,
            id="certificate for any usage verifies",
        ),
    ],
)
def test_certificate_authority_verifies_only_its_own_valid_client_certificates(
    make: Callable[[CA], Issued], verifies: bool
) -> None:
    """A chain counts only if it reaches this bundle, is valid now and may authenticate clients."""
    ca = CA("front-proxy-ca")
    leaf = make(ca)
    assert CertificateAuthority((ca.cert,), "test CA").verifies(leaf.cert) is verifies


def test_minimal_ca_made_by_openssl_req_is_accepted() -> None:
    """A CA with a non-critical basicConstraints and no
    keyUsage (as `openssl req -x509` makes) still verifies."""
    ca = CA("hand-made", minimal=True)
    assert CertificateAuthority((ca.cert,), "hand-made").verifies(ca.issue("alice").cert)


def test_verification_time_is_respected() -> None:
    """A certificate valid today does not verify at a time after it expires."""
    ca = CA("ca")
    leaf = ca.issue("alice").cert
    assert not CertificateAuthority((ca.cert,), "ca").verifies(leaf, datetime.now(UTC) + timedelta(days=30))


def test_empty_bundle_is_refused() -> None:
    """A CA bundle without a certificate is an error, not "trust nothing" (or everything)."""
    with pytest.raises(ValueError, match="must hold at least one certificate"):
        CertificateAuthority((), "client CA")


def test_garbage_bundle_names_what_it_is() -> None:
    """Parsing a bundle that is not PEM names the bundle."""
    with pytest.raises(ValueError, match="unable to parse requestheader client CA"):
        load_certificates(b"garbage", "requestheader client CA")
