"""Delegated authentication: who is asking, as the kube-apiserver would decide it.

Three authenticators are tried in the kube-apiserver's order, and the first that recognises the
request wins:

1. **front proxy** (requestheader): the connection's client certificate chains to the requestheader
   CA and its CN is an allowed name; only then is the user read from `X-Remote-User`,
   `X-Remote-Group` and `X-Remote-Extra-*`. On any other connection those headers are ignored.
2. **client certificate**: a certificate chaining to the client CA is the user CN in groups O.
3. **bearer token**: `Authorization: Bearer …` is checked with a `TokenReview`; answers are cached.

Certificate chains are checked by `adapter.security.certauth`; the cluster's published settings are read by
`adapter.security.clusterauth`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol
from urllib.parse import unquote

from cryptography import x509
from cryptography.x509.oid import NameOID
from multidict import MultiMapping

from adapter.errors import Unauthorized
from adapter.security.certauth import CertificateAuthority
from adapter.security.ttlcache import TTLCache

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

    `headers` must be case-insensitive (aiohttp's request headers are). As in the kube-apiserver's
    requestheader authenticator: the user is the first value of the first configured user header
    that has a non-empty one; every non-empty value of every group header is a group; a header
    starting with an extra prefix adds its values under the lowercased, percent-decoded rest of
    its name.
    """
    name = next((v for h in config.username_headers if (v := headers.get(h, "").strip())), "")
    if not name:
        return None
    groups = tuple(v for h in config.group_headers for v in headers.getall(h, ()) if v)
    extra: dict[str, list[str]] = {}
    # An empty prefix would turn every header (cookies, Authorization) into an extra attribute.
    prefixes = [p.lower() for p in config.extra_headers_prefixes if p]
    names = list(dict.fromkeys(h.lower() for h in headers))
    for prefix in prefixes:
        for header in names:
            if header.startswith(prefix) and len(header) > len(prefix):
                # The key is percent-encoded on the wire: it may hold '/'
                # (authentication.kubernetes.io/pod-name).
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
        """The user of a request with client certificate `peer_der` (DER, or `None`) and `headers`.

        Raises `Unauthorized` when no authenticator recognises the request, and the reviewer's
        `AdapterError` when a bearer token could not be reviewed (an unknown answer is not a 401).
        """
        peer = _load_peer(peer_der)
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
            + ("the client certificate is not accepted" if peer_der else "no credentials")
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
        # The cache holds a digest, never the token itself. A failed review raises and is not cached.
        key = hashlib.sha256(token.encode()).hexdigest()
        user = await self._cache.get_or_load(
            key, lambda: reviewer.review_token(token), lambda _: self._token_ttl
        )
        if user is None:
            raise Unauthorized("unable to authenticate bearer token: the token is not valid")
        return user


def _load_peer(peer_der: bytes | None) -> x509.Certificate | None:
    if not peer_der:
        return None
    try:
        return x509.load_der_x509_certificate(peer_der)
    except ValueError as exc:
        # OpenSSL accepted it, but cryptography will not parse it (e.g. a negative serial): not a user.
        log.debug("unable to parse client certificate: %s", exc)
        return None


def _bearer_token(headers: MultiMapping[str]) -> str | None:
    value = headers.get("Authorization", "")
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token
