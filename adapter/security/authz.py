"""Delegated authorization: may this user do this, as the cluster's authorizer decides with a
`SubjectAccessReview`.

Decisions are cached briefly, allowed and denied ones separately (as the kube-apiserver's webhook
authorizer does), so a steady HPA costs one review per metric and namespace every few seconds and
a revoked permission takes effect within the allowed TTL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from adapter.security.authn import UserInfo
from adapter.security.ttlcache import TTLCache

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResourceAttributes:
    """A request on an API resource (`resourceAttributes` of a SubjectAccessReview)."""

    verb: str
    group: str
    version: str
    resource: str
    namespace: str = ""
    name: str = ""


@dataclass(frozen=True)
class NonResourceAttributes:
    """A request on a plain path such as `/metrics` (`nonResourceAttributes`)."""

    verb: str
    path: str


Attributes = ResourceAttributes | NonResourceAttributes


@dataclass(frozen=True)
class AccessDecision:
    """The authorizer's answer; `reason` is for the log line only, never for the client."""

    allowed: bool
    reason: str = ""


class AccessReviewer(Protocol):
    """Asks the kube-apiserver whether a user may do something."""

    async def review_access(self, user: UserInfo, attributes: Attributes) -> AccessDecision:
        """The cluster's decision. Raises `AdapterError` when the review could not be made."""
        ...


class Authorizer:
    """`SubjectAccessReview` with separate TTL caches for allowed and denied decisions."""

    def __init__(
        self,
        reviewer: AccessReviewer,
        *,
        allowed_ttl: float = 10.0,
        denied_ttl: float = 10.0,
        cache: TTLCache[tuple[UserInfo, Attributes], AccessDecision] | None = None,
    ) -> None:
        self._reviewer = reviewer
        self._allowed_ttl = allowed_ttl
        self._denied_ttl = denied_ttl
        self._cache: TTLCache[tuple[UserInfo, Attributes], AccessDecision] = (
            cache if cache is not None else TTLCache()
        )

    async def authorize(self, user: UserInfo, attributes: Attributes) -> AccessDecision:
        """The decision for `user` doing `attributes`, from the cache when it is fresh.

        Raises `AdapterError` when the kube-apiserver cannot be asked: an unknown answer is never
        turned into an allow (nor cached as a deny).
        """
        return await self._cache.get_or_load(
            (user, attributes),
            lambda: self._reviewer.review_access(user, attributes),
            lambda decision: self._allowed_ttl if decision.allowed else self._denied_ttl,
        )


class PathPatterns:
    """Paths that skip authentication and authorization (`--authorization-always-allow-paths`).

    A pattern is an exact path, or a prefix ending in `*` (`/debug/*`), as in Kubernetes.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self.exact: frozenset[str] = frozenset()
        self.prefixes: tuple[str, ...] = ()
        exact: set[str] = set()
        prefixes: list[str] = []
        for pattern in patterns:
            if not pattern.startswith("/"):
                raise ValueError(f"always-allow path {pattern!r} must start with '/'")
            if "*" in pattern[:-1]:
                raise ValueError(
                    f"always-allow path {pattern!r} must have '*' only at its end, e.g. '/debug/*'"
                )
            if pattern.endswith("*"):
                prefixes.append(pattern[:-1])
            else:
                exact.add(pattern)
        self.exact = frozenset(exact)
        self.prefixes = tuple(prefixes)

    def matches(self, path: str) -> bool:
        """Whether `path` (already normalized: no `..`, no duplicate slashes) is always allowed."""
        return path in self.exact or path.startswith(self.prefixes)
