"""The HTTP side of access control: map a request to SubjectAccessReview terms, then authenticate
(401) and authorize (403) it in an aiohttp middleware, before any handler runs. When the
kube-apiserver cannot be asked, the answer is 503 (`errors.ReviewUnavailable`), within the review
timeout.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from adapter.api import routes as api
from adapter.errors import AdapterError, Forbidden, Unauthorized
from adapter.security.authn import Authenticator, UserInfo
from adapter.security.authz import (
    Attributes,
    Authorizer,
    NonResourceAttributes,
    PathPatterns,
    ResourceAttributes,
)

log = logging.getLogger(__name__)

# The kube-apiserver maps HTTP methods of resource requests to these verbs; other paths use the method.
_RESOURCE_VERBS: Final = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


# The routes whose requests are resource requests, by their canonical path (see `api.add_routes`).
_METRIC_ROUTE: Final = f"{api.BASE}/namespaces/{{namespace}}/{{metric}}"
_RESOURCE_LIST_ROUTE: Final = api.BASE
_GROUP_ROUTE: Final = f"/apis/{api.GROUP}"


def request_attributes(request: web.Request) -> Attributes:
    """What a request does, in SubjectAccessReview terms, read from the route it resolved to.

    - `…/namespaces/{ns}/{metric}`: verb `get` on resource `{metric}` of the group in `{ns}`;
    - `/apis/{group}/{version}` (the resource list): `list` on every resource (`*`) of the group;
    - `/apis/{group}`: `get` on every resource of the group;
    - anything else (`/apis`, `/openapi/v2`, `/metrics`, paths no route serves): a non-resource
      request on the path, with the lowercased method as verb.

    aiohttp resolves the route before any middleware runs, so the namespace and metric authorized
    are exactly the `match_info` the handler reads: no spelling of the path (encoded slashes, dot
    segments, doubled or trailing slashes, a query string) can authorize one thing and serve another.
    """
    route = request.match_info.route
    canonical = route.resource.canonical if route.resource is not None else None
    verb = _RESOURCE_VERBS.get(request.method.upper(), request.method.lower())
    if canonical == _METRIC_ROUTE:
        info = request.match_info
        return ResourceAttributes(verb, api.GROUP, api.VERSION, info["metric"], namespace=info["namespace"])
    if canonical == _RESOURCE_LIST_ROUTE:
        return ResourceAttributes("list" if verb == "get" else verb, api.GROUP, api.VERSION, "*")
    if canonical == _GROUP_ROUTE:
        return ResourceAttributes(verb, api.GROUP, "", "*")
    return NonResourceAttributes(request.method.lower(), request.path or "/")


def _decision_fields(user: UserInfo | None, attributes: Attributes) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "user": user.name if user else "",
        "groups": list(user.groups) if user else [],
        "authenticated_by": user.method if user else "",
        "verb": attributes.verb,
    }
    if isinstance(attributes, ResourceAttributes):
        fields.update(resource=f"{attributes.resource}.{attributes.group}", namespace=attributes.namespace)
    else:
        fields.update(resource=attributes.path, namespace="")
    return fields


def make_middleware(
    authenticator: Authenticator, authorizer: Authorizer, always_allow: PathPatterns
) -> Middleware:
    """The aiohttp middleware: authenticate (401), authorize (403), then call the handler."""

    @web.middleware
    async def authenticate_and_authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
        if always_allow.matches(request.path):
            log.debug(
                "request on an always-allowed path",
                extra={"verb": request.method.lower(), "path": request.path},
            )
            return await handler(request)
        attributes = request_attributes(request)
        transport = request.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        peer = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        user: UserInfo | None = None
        try:
            user = await authenticator.authenticate(peer, request.headers)
            decision = await authorizer.authorize(user, attributes)
        except Unauthorized as error:
            log.debug("request not authenticated: %s", error, extra=_decision_fields(None, attributes))
            return api.status_response(error)
        except AdapterError as error:
            # The kube-apiserver could not be asked (TokenReview or SubjectAccessReview): an unknown
            # answer is neither a 401 nor an allow nor a deny, and it is not cached.
            log.warning(
                "unable to authenticate or authorize request: %s",
                error,
                extra=_decision_fields(user, attributes),
            )
            return api.status_response(error)
        fields = _decision_fields(user, attributes)
        log.debug(
            "request allowed" if decision.allowed else "request forbidden",
            extra={**fields, "allowed": decision.allowed, "reason": decision.reason},
        )
        if not decision.allowed:
            metric = (
                attributes.resource
                if isinstance(attributes, ResourceAttributes) and attributes.namespace
                else ""
            )
            return api.status_response(
                Forbidden(f"user {user.name!r} may not {attributes.verb} {fields['resource']}"), metric
            )
        return await handler(request)

    return authenticate_and_authorize
