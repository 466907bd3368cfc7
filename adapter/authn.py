"""Delegated authentication: who is asking, as the kube-apiserver would decide it.

Three authenticators are tried in the kube-apiserver's order, and the first that recognises the
request wins:

1. **front proxy** (requestheader): the connection's client certificate chains to the requestheader
   CA and its CN is an allowed name; only then is the user read from `X-Remote-User`,
   `X-Remote-Group` and `X-Remote-Extra-*`. On any other connection those headers are ignored.
2. **client certificate**: a certificate chaining to the client CA is the user CN in groups O.
3. **bearer token**: `Authorization: Bearer …` is checked with a `TokenReview`; answers are cached.

The TLS layer trusts the union of both CAs (OpenSSL only says "it chained to one of them"), so
each certificate authenticator verifies the chain again against its own CA alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Protocol
from urllib.parse import unquote

from cryptography import x509
from cryptography.x509 import verification
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from multidict import MultiMapping

from adapter.errors import AdapterError, Unauthorized
from adapter.ttlcache import TTLCache

log = logging.getLogger(__name__)

DEFAULT_USERNAME_HEADERS: Final = ("X-Remote-User",)
DEFAULT_GROUP_HEADERS: Final = ("X-Remote-Group",)
DEFAULT_EXTRA_HEADERS_PREFIXES: Final = ("X-Remote-Extra-",)


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user, as the kube-apiserver's `user.Info`."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Extra attributes as sorted (key, values) pairs, so the user is hashable (a cache key)."""
    method: str = field(default="", compare=False)
    """How the user was authenticated (`front-proxy`, `client-certificate`, `token`), for logs."""

    @staticmethod
    def make_extra(extra: Mapping[str, Iterable[str]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The `extra` field from a mapping."""
        return tuple(sorted((key, tuple(values)) for key, values in extra.items()))


class TokenReviewer(Protocol):
    """Asks the kube-apiserver who a bearer token belongs to."""

    async def review_token(self, token: str) -> UserInfo | None:
        """The token's user, or `None` when the kube-apiserver says it is not authenticated.

        Raises `AdapterError` when the review could not be made; never returns a guess.
        """
        ...


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

    The checks are the kube-apiserver's (signature, validity, CA flag, client-auth usage), not the
    stricter Web PKI profile: cluster CAs and front-proxy certificates carry no SAN, and CAs made
    with `openssl req -x509` mark basicConstraints non-critical. Intermediates are not sent to us
    by the TLS layer, so a bundle must contain the certificate that issued the leaf.
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

    def verifies(self, leaf: x509.Certificate, now: datetime | None = None) -> bool:
        """Whether `leaf` chains to this bundle and is valid at `now`."""
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


def _names(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(attribute.value) for attribute in cert.subject.get_attributes_for_oid(oid)]


@dataclass(frozen=True)
class RequestHeaderConfig:
    """Front-proxy settings: the CA, allowed names and header names (`--requestheader-*`)."""

    ca: CertificateAuthority
    allowed_names: tuple[str, ...] = ()
    """Common names a front-proxy certificate may have; empty means any certificate of the CA."""
    username_headers: tuple[str, ...] = DEFAULT_USERNAME_HEADERS
    group_headers: tuple[str, ...] = DEFAULT_GROUP_HEADERS
    extra_headers_prefixes: tuple[str, ...] = DEFAULT_EXTRA_HEADERS_PREFIXES


def user_from_headers(config: RequestHeaderConfig, headers: MultiMapping[str]) -> UserInfo | None:
    """The user a trusted front proxy names in its headers; `None` without a user name.

    `headers` must be case-insensitive (aiohttp's request headers are). A header may repeat: every
    group value counts, and the first non-empty user name wins, as in the kube-apiserver.
    """
    name = next((v.strip() for h in config.username_headers for v in headers.getall(h, ()) if v.strip()), "")
    if not name:
        return None
    groups = tuple(v for h in config.group_headers for v in headers.getall(h, ()))
    extra: dict[str, list[str]] = {}
    for header in dict.fromkeys(h.lower() for h in headers):
        for prefix in config.extra_headers_prefixes:
            if header.startswith(prefix.lower()) and len(header) > len(prefix):
                # The key is percent-encoded on the wire: it may hold '/' (authentication.kubernetes.io/pod-name).
                key = unquote(header[len(prefix) :])
                extra.setdefault(key, []).extend(headers.getall(header, ()))
    return UserInfo(name, groups, extra=UserInfo.make_extra(extra), method="front-proxy")


class Authenticator:
    """Decides who a request comes from, or raises `Unauthorized`.

    Certificate authorities can be replaced while serving (`set_authorities`), when the CA files
    or the cluster's ConfigMap change.
    """

    def __init__(
        self,
        *,
        requestheader: RequestHeaderConfig | None = None,
        client_ca: CertificateAuthority | None = None,
        tokens: TokenReviewer | None = None,
        token_ttl: float = 10.0,
        cache: TTLCache[str, UserInfo | None] | None = None,
    ) -> None:
        self.requestheader = requestheader
        self.client_ca = client_ca
        self._tokens = tokens
        self._token_ttl = token_ttl
        self._cache: TTLCache[str, UserInfo | None] = cache if cache is not None else TTLCache()

    def set_authorities(
        self, requestheader: RequestHeaderConfig | None, client_ca: CertificateAuthority | None
    ) -> None:
        """Use new certificate authorities for the next requests."""
        self.requestheader = requestheader
        self.client_ca = client_ca

    async def authenticate(self, peer_der: bytes | None, headers: MultiMapping[str]) -> UserInfo:
        """The user of a request with client certificate `peer_der` (DER, or `None`) and `headers`."""
        peer = x509.load_der_x509_certificate(peer_der) if peer_der else None
        if peer is not None:
            user = self._from_certificate(peer, headers)
            if user is not None:
                return user
        if self._names_user(headers):
            log.debug(
                "ignoring front-proxy user headers on a connection without an allowed front-proxy certificate"
            )
        token = _bearer_token(headers)
        if token is not None:
            return await self._from_token(token)
        raise Unauthorized(
            "unable to authenticate request: "
            + ("the client certificate is not accepted" if peer is not None else "no credentials")
        )

    def _from_certificate(self, peer: x509.Certificate, headers: MultiMapping[str]) -> UserInfo | None:
        cn = next(iter(_names(peer, NameOID.COMMON_NAME)), "")
        requestheader = self.requestheader
        if requestheader is not None and requestheader.ca.verifies(peer):
            if requestheader.allowed_names and cn not in requestheader.allowed_names:
                log.debug(
                    "front-proxy certificate has a common name that is not allowed",
                    extra={"cn": cn, "allowed_names": list(requestheader.allowed_names)},
                )
            else:
                user = user_from_headers(requestheader, headers)
                if user is not None:
                    return user
                log.debug("front-proxy request without a user header", extra={"cn": cn})
        if self.client_ca is not None and cn and self.client_ca.verifies(peer):
            return UserInfo(cn, tuple(_names(peer, NameOID.ORGANIZATION_NAME)), method="client-certificate")
        return None

    def _names_user(self, headers: MultiMapping[str]) -> bool:
        names = self.requestheader.username_headers if self.requestheader else DEFAULT_USERNAME_HEADERS
        return any(name in headers for name in names)

    async def _from_token(self, token: str) -> UserInfo:
        if self._tokens is None:
            raise Unauthorized("unable to authenticate bearer token: token review is not configured")
        reviewer = self._tokens
        # The cache holds a digest, never the token itself.
        key = hashlib.sha256(token.encode()).hexdigest()
        try:
            user = await self._cache.get_or_load(
                key, lambda: reviewer.review_token(token), lambda _: self._token_ttl
            )
        except AdapterError as error:
            log.warning("unable to review bearer token: %s", error)
            raise Unauthorized(f"unable to authenticate bearer token: {error}") from error
        if user is None:
            raise Unauthorized("unable to authenticate bearer token: the token is not valid")
        return user


def _bearer_token(headers: MultiMapping[str]) -> str | None:
    value = headers.get("Authorization", "")
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


# The ConfigMap the kube-apiserver publishes for delegated authentication, and its keys.
CONFIGMAP_NAMESPACE: Final = "kube-system"
CONFIGMAP_NAME: Final = "extension-apiserver-authentication"


@dataclass(frozen=True)
class ClusterAuthentication:
    """What `kube-system/extension-apiserver-authentication` says; empty fields were not published."""

    client_ca_pem: bytes = b""
    requestheader_ca_pem: bytes = b""
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ()
    group_headers: tuple[str, ...] = ()
    extra_headers_prefixes: tuple[str, ...] = ()


def _json_list(data: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = data.get(key, "")
    if not raw.strip():
        return ()
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"configmap key {key!r} value {raw!r} must be a JSON list of strings")
    return tuple(value)


def parse_cluster_authentication(data: Mapping[str, str]) -> ClusterAuthentication:
    """Parse the ConfigMap's `data`; `ValueError` names the key that is malformed."""
    return ClusterAuthentication(
        client_ca_pem=data.get("client-ca-file", "").encode(),
        requestheader_ca_pem=data.get("requestheader-client-ca-file", "").encode(),
        allowed_names=_json_list(data, "requestheader-allowed-names"),
        username_headers=_json_list(data, "requestheader-username-headers"),
        group_headers=_json_list(data, "requestheader-group-headers"),
        extra_headers_prefixes=_json_list(data, "requestheader-extra-headers-prefix"),
    )
