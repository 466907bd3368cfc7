"""The adapter's one Kubernetes client: every kube-apiserver call it makes, through the official client.

Secure serving reviews tokens and access and reads a ConfigMap; the scrape source lists
EndpointSlices. All of them go through one `KubeClient`, built once by the server's assembly from
`--kubeconfig` (else the in-cluster service account) with a client configuration of its own: the
`kubernetes` library's global default configuration is never read nor changed, so authentication
and discovery always talk to the same cluster as the same identity.

The client is synchronous (urllib3), so every call runs in a worker thread of the client's own
small pool and never blocks the event loop. Each call has one deadline, `timeout`, that covers
waiting for a worker, connecting, retrying and reading: a slow or unreachable kube-apiserver makes
a call fail after at most that long, never hang. A failed review or ConfigMap read becomes
`ReviewUnavailable` (503), whose log text names the call and the cause and whose outward message
stays generic; a failed EndpointSlice list becomes `SourceUnavailable`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
from collections.abc import Callable
from typing import Any, Final, TypeVar

import kubernetes.client
import kubernetes.config
import urllib3.exceptions
import yaml
from kubernetes.client.exceptions import ApiException

from adapter.errors import KubeConfigError, ReviewUnavailable, SourceUnavailable, Unavailable
from adapter.security.authn import UserInfo
from adapter.security.authz import AccessDecision, Attributes, NonResourceAttributes

log = logging.getLogger(__name__)

T = TypeVar("T")
# Errors the blocking client raises for an unreachable or unhappy kube-apiserver.
_CLIENT_ERRORS: Final = (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)
# Worker threads per client. A call holds one for at most about two timeouts (one connect retry);
# beyond this many stuck calls, new ones wait for a worker inside their own deadline instead of
# piling threads onto a kube-apiserver that is already not answering.
_WORKERS: Final = 8
# One retry for a connection that could not be made (a pooled connection the server had closed);
# none for reads and statuses, whose repetition would only multiply the latency of a slow server.
_RETRIES: Final = urllib3.Retry(total=1, connect=1, read=0, status=0, redirect=0)
# One EndpointSlice list page; a cluster-wide list of vLLM slices rarely needs a second one.
_PAGE_SIZE: Final = 500


def load_api_client(kubeconfig: str | None) -> Any:
    """A `kubernetes.client.ApiClient` from `kubeconfig`, or from the in-cluster service account.

    Blocking (it reads files); call it in a thread from async code.
    """
    configuration = kubernetes.client.Configuration()
    try:
        if kubeconfig:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, client_configuration=configuration, persist_config=False
            )
        else:
            kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (kubernetes.config.ConfigException, OSError, yaml.YAMLError) as exc:
        where = (
            f"kubeconfig {kubeconfig!r}"
            if kubeconfig
            else "the in-cluster configuration (pass --kubeconfig outside a cluster)"
        )
        raise KubeConfigError(f"unable to load {where}: {exc}") from exc
    # Read before the ApiClient builds its connection pool, which takes the retry policy from here.
    configuration.retries = _RETRIES
    return kubernetes.client.ApiClient(configuration)


class KubeClient:
    """TokenReview, SubjectAccessReview, ConfigMap reads and EndpointSlice lists, each within `timeout`.

    Satisfies `TokenReviewer` and `AccessReviewer`; `list_endpoint_slices` is discovery's `SliceLister`.
    """

    def __init__(self, api_client: Any, *, timeout: float = 5.0) -> None:
        self._api = api_client
        self._timeout = timeout
        self._executor = concurrent.futures.ThreadPoolExecutor(_WORKERS, thread_name_prefix="kube-api")

    @classmethod
    async def connect(cls, kubeconfig: str | None, *, request_timeout: float = 5.0) -> KubeClient:
        """Load the configuration (in a thread) and return a client; raises `KubeConfigError`."""
        return cls(await asyncio.to_thread(load_api_client, kubeconfig), timeout=request_timeout)

    async def close(self) -> None:
        """Release the client's connection pool and worker
        threads (calls still running finish on their own)."""
        await asyncio.to_thread(self._api.close)
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _call(
        self, what: str, call: Callable[[], T], error: type[Unavailable] = ReviewUnavailable
    ) -> T:
        # The deadline covers the wait for a worker too; on expiry a queued call is dropped, a
        # running one ends at urllib3's own timeout (the thread cannot be interrupted).
        future = asyncio.wrap_future(self._executor.submit(call))
        try:
            return await asyncio.wait_for(future, self._timeout)
        except TimeoutError as exc:
            raise error(f"unable to {what}: no answer within {self._timeout:g}s") from exc
        except _CLIENT_ERRORS as exc:
            cause = (
                f"HTTP {exc.status} {exc.reason}"
                if isinstance(exc, ApiException)
                else str(exc) or type(exc).__name__
            )
            raise error(f"unable to {what}: {cause}") from exc

    async def list_endpoint_slices(self, namespace: str | None, selector: str) -> list[Any]:
        """The `V1EndpointSlice`s matching `selector` in `namespace` (`None`: every namespace).

        Follows `continue` tokens, one call (and one deadline) per page of `_PAGE_SIZE`; any failed
        page is `SourceUnavailable` naming the namespace and the cause.
        """
        api = kubernetes.client.DiscoveryV1Api(self._api)
        list_page = api.list_endpoint_slice_for_all_namespaces
        what = "list EndpointSlices in all namespaces"
        if namespace is not None:
            list_page = functools.partial(api.list_namespaced_endpoint_slice, namespace)
            what = f"list EndpointSlices in namespace {namespace!r}"
        return await self._paged(what, list_page, selector)

    async def list_pods(self, namespace: str | None, selector: str) -> list[Any]:
        """The `V1Pod`s matching `selector` in `namespace` (`None`: every namespace), paged as
        `list_endpoint_slices`: discovery copies `scrape.pod_labels` from them."""
        api = kubernetes.client.CoreV1Api(self._api)
        list_page = api.list_pod_for_all_namespaces
        what = "list pods in all namespaces"
        if namespace is not None:
            list_page = functools.partial(api.list_namespaced_pod, namespace)
            what = f"list pods in namespace {namespace!r}"
        return await self._paged(what, list_page, selector)

    async def _paged(self, what: str, list_page: Any, selector: str) -> list[Any]:
        """Every item of a list call, a page of `_PAGE_SIZE` (one call, one deadline) at a time."""
        items: list[Any] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "label_selector": selector,
                "limit": _PAGE_SIZE,
                "_request_timeout": self._timeout,
            }
            if token:
                kwargs["_continue"] = token
            page = await self._call(what, functools.partial(list_page, **kwargs), SourceUnavailable)
            items.extend(page.items or ())
            token = page.metadata._continue if page.metadata is not None else None
            if not token:
                return items

    async def read_config_map(self, namespace: str, name: str) -> dict[str, str]:
        """The `data` of a ConfigMap."""
        core = kubernetes.client.CoreV1Api(self._api)
        config_map = await self._call(
            f"read configmap {namespace}/{name}",
            lambda: core.read_namespaced_config_map(name, namespace, _request_timeout=self._timeout),
        )
        return dict(config_map.data or {})

    async def review_token(self, token: str) -> UserInfo | None:
        """`TokenReview` of a bearer token: its user, `None`
        when it is not authenticated, or `ReviewUnavailable`."""
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

    async def review_access(self, user: UserInfo, attributes: Attributes) -> AccessDecision:
        """`SubjectAccessReview` of `user` doing `attributes`; `ReviewUnavailable` when it cannot be made."""
        api = kubernetes.client.AuthorizationV1Api(self._api)
        body = kubernetes.client.V1SubjectAccessReview(spec=_access_review_spec(user, attributes))
        review = await self._call(
            "create subjectaccessreview",
            lambda: api.create_subject_access_review(body, _request_timeout=self._timeout),
        )
        status = review.status
        if status is None:
            raise ReviewUnavailable("unable to create subjectaccessreview: the answer has no status")
        if status.evaluation_error:
            # The authorizer still decided (with the rules it could evaluate); record why it may be partial.
            log.info("subject access review evaluation error: %s", status.evaluation_error)
        return AccessDecision(bool(status.allowed) and not status.denied, status.reason or "")


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
