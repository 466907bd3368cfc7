"""The HTTP side of access control: map a request to SubjectAccessReview terms, then authenticate
(401) and authorize (403) it in an aiohttp middleware, before any handler runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final
from urllib.parse import unquote

from aiohttp import web

from adapter import api
from adapter.authn import Authenticator, UserInfo
from adapter.authz import Attributes, Authorizer, NonResourceAttributes, PathPatterns, ResourceAttributes
from adapter.errors import AdapterError, Forbidden, Unauthorized

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]

# The kube-apiserver maps HTTP methods of resource requests to these verbs; other paths use the method.
_RESOURCE_VERBS: Final = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


def request_attributes(method: str, raw_path: str) -> Attributes:
    """What a request does, in SubjectAccessReview terms.

    - `…/namespaces/{ns}/{metric}`: verb `get` on resource `{metric}` of the group in `{ns}`;
    - `/apis/{group}/{version}` (the resource list): `list` on every resource (`*`) of the group;
    - `/apis/{group}`: `get` on every resource of the group;
    - anything else (`/apis`, `/openapi/v2`, `/metrics`): a non-resource request on the path.

    `raw_path` is split before percent-decoding, as the router does, so an encoded `/` cannot move
    a request from one shape to another.
    """
    segments = [unquote(segment) for segment in raw_path.split("/")[1:]]
    if len(segments) >= 2 and segments[:2] == ["apis", api.GROUP] and all(segments):
        verb = _RESOURCE_VERBS.get(method.upper(), method.lower())
        if len(segments) == 2:
            return ResourceAttributes(verb, api.GROUP, "", "*")
        if len(segments) == 3:
            return ResourceAttributes("list" if verb == "get" else verb, api.GROUP, segments[2], "*")
        if len(segments) == 6 and segments[3] == "namespaces":
            return ResourceAttributes(verb, api.GROUP, segments[2], segments[5], namespace=segments[4])
    return NonResourceAttributes(method.lower(), unquote(raw_path) or "/")


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
            return await handler(request)
        attributes = request_attributes(request.method, request.rel_url.raw_path)
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
            # The kube-apiserver could not be asked: an unknown answer is neither allow nor deny.
            log.warning("unable to authorize request: %s", error, extra=_decision_fields(user, attributes))
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
