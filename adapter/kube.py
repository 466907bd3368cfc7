"""The few kube-apiserver calls secure serving needs, through the official `kubernetes` client.

The client is synchronous (urllib3), so every call runs in a worker thread and never blocks the
event loop; each has its own timeout. Failures become `AdapterError`s that name the call and the
cause for the log; the outward answer stays generic.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final, TypeVar

import kubernetes.client
import kubernetes.config
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from adapter.authn import UserInfo
from adapter.authz import Attributes, Decision, NonResourceAttributes
from adapter.errors import AdapterError

log = logging.getLogger(__name__)

T = TypeVar("T")
# Errors the blocking client raises for an unreachable or unhappy kube-apiserver.
_CLIENT_ERRORS: Final = (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


class KubeConfigError(Exception):
    """Neither the kubeconfig file nor the in-cluster configuration could be loaded."""


def load_api_client(kubeconfig: str | None) -> Any:
    """A `kubernetes.client.ApiClient` from `kubeconfig`, or from the in-cluster service account.

    Blocking (it reads files); call it in a thread from async code.
    """
    try:
        if kubeconfig:
            return kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, persist_config=False
            )
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return kubernetes.client.ApiClient(configuration)
    except (kubernetes.config.ConfigException, OSError) as exc:
        where = (
            f"kubeconfig {kubeconfig!r}"
            if kubeconfig
            else "the in-cluster configuration (pass --kubeconfig outside a cluster)"
        )
        raise KubeConfigError(f"unable to load {where}: {exc}") from exc


class KubeClient:
    """TokenReview, SubjectAccessReview and ConfigMap reads; satisfies `TokenReviewer` and `AccessReviewer`."""

    def __init__(self, api_client: Any, *, timeout: float = 5.0) -> None:
        self._api = api_client
        self._timeout = timeout

    @classmethod
    async def connect(cls, kubeconfig: str | None, *, request_timeout: float = 5.0) -> KubeClient:
        """Load the configuration (in a thread) and return a client; raises `KubeConfigError`."""
        return cls(await asyncio.to_thread(load_api_client, kubeconfig), timeout=request_timeout)

    async def close(self) -> None:
        """Release the client's connection pool."""
        await asyncio.to_thread(self._api.close)

    async def _call(self, what: str, call: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(call)
        except _CLIENT_ERRORS as exc:
            cause = (
                f"HTTP {exc.status} {exc.reason}"
                if isinstance(exc, ApiException)
                else str(exc) or type(exc).__name__
            )
            raise AdapterError(f"unable to {what}: {cause}") from exc

    async def read_config_map(self, namespace: str, name: str) -> dict[str, str]:
        """The `data` of a ConfigMap."""
        core = kubernetes.client.CoreV1Api(self._api)
        config_map = await self._call(
            f"read configmap {namespace}/{name}",
            lambda: core.read_namespaced_config_map(name, namespace, _request_timeout=self._timeout),
        )
        return dict(config_map.data or {})

    async def review_token(self, token: str) -> UserInfo | None:
        """`TokenReview` of a bearer token: its user, or `None` when it is not authenticated."""
        api = kubernetes.client.AuthenticationV1Api(self._api)
        body = kubernetes.client.V1TokenReview(spec=kubernetes.client.V1TokenReviewSpec(token=token))
        review = await self._call(
            "create tokenreview", lambda: api.create_token_review(body, _request_timeout=self._timeout)
        )
        status = review.status
        user = status.user if status is not None and status.authenticated else None
        if user is None or not user.username:
            error = status.error if status is not None else None
            log.debug("token review: not authenticated", extra={"error": error or ""})
            return None
        return UserInfo(
            name=user.username,
            groups=tuple(user.groups or ()),
            uid=user.uid or "",
            extra=UserInfo.make_extra(user.extra or {}),
            method="token",
        )

    async def review_access(self, user: UserInfo, attributes: Attributes) -> Decision:
        """`SubjectAccessReview` of `user` doing `attributes`."""
        api = kubernetes.client.AuthorizationV1Api(self._api)
        body = kubernetes.client.V1SubjectAccessReview(spec=_access_review_spec(user, attributes))
        review = await self._call(
            "create subjectaccessreview",
            lambda: api.create_subject_access_review(body, _request_timeout=self._timeout),
        )
        status = review.status
        if status is None:
            raise AdapterError("unable to create subjectaccessreview: the answer has no status")
        if status.evaluation_error:
            # The authorizer still decided (with the rules it could evaluate); record why it may be partial.
            log.info("subject access review evaluation error: %s", status.evaluation_error)
        return Decision(bool(status.allowed) and not status.denied, status.reason or "")


def _access_review_spec(user: UserInfo, attributes: Attributes) -> Any:
    client = kubernetes.client
    resource = None
    non_resource = None
    if isinstance(attributes, NonResourceAttributes):
        non_resource = client.V1NonResourceAttributes(path=attributes.path, verb=attributes.verb)
    else:
        resource = client.V1ResourceAttributes(
            verb=attributes.verb,
            group=attributes.group,
            version=attributes.version,
            resource=attributes.resource,
            namespace=attributes.namespace or None,
            name=attributes.name or None,
        )
    return client.V1SubjectAccessReviewSpec(
        user=user.name,
        groups=list(user.groups) or None,
        uid=user.uid or None,
        extra={key: list(values) for key, values in user.extra} or None,
        resource_attributes=resource,
        non_resource_attributes=non_resource,
    )
