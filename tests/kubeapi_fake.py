"""A stand-in for the kube-apiserver, for the secure-serving tests.

This is a mock, and the only one these tests use: no kube-apiserver can run on this machine. It
plays the kube-apiserver's part for exactly the calls the adapter makes — `TokenReview`,
`SubjectAccessReview`, reading `kube-system/extension-apiserver-authentication` and listing
EndpointSlices — over real TLS on a port of its own, and the adapter reaches it through the official
`kubernetes` client and a kubeconfig, as it would in a cluster. Authorization follows a short list
of `Grant`s (a tiny RBAC); every review and list it receives is recorded so tests can assert what
was asked.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from adapter.kube import KubeClient
from tests.certs import CA


@dataclass(frozen=True)
class Grant:
    """Allows `subject` (a user name or a group) `verbs` on `resources` in `namespaces`, or on `paths`.

    Empty `namespaces` means every namespace (a ClusterRoleBinding); `"*"` matches any verb or resource.
    """

    subject: str
    verbs: tuple[str, ...] = ("get",)
    resources: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    group: str = "external.metrics.k8s.io"


def _matches(grant: Grant, spec: dict[str, Any]) -> bool:
    subjects = {spec.get("user", ""), *spec.get("groups", [])}
    if grant.subject not in subjects:
        return False
    resource = spec.get("resourceAttributes")
    if resource is not None:
        return (
            (resource.get("verb") in grant.verbs or "*" in grant.verbs)
            and (resource.get("group", "") == grant.group)
            and (resource.get("resource") in grant.resources or "*" in grant.resources)
            and (not grant.namespaces or resource.get("namespace") in grant.namespaces)
        )
    non_resource = spec.get("nonResourceAttributes") or {}
    return non_resource.get("path") in grant.paths and (
        non_resource.get("verb") in grant.verbs or "*" in grant.verbs
    )


class FakeKubeAPI:
    """The fake kube-apiserver: start it, point the adapter at `kubeconfig`, stop it in teardown."""

    def __init__(self, ca: CA) -> None:
        self.ca = ca
        self.tokens: dict[str, dict[str, Any]] = {}
        """Valid bearer tokens and the `user` a TokenReview returns for each."""
        self.grants: list[Grant] = []
        self.config_map: dict[str, str] | None = None
        """The data of extension-apiserver-authentication, or `None` for 404."""
        self.failing = False
        """Answer every call with 500, as an overloaded kube-apiserver does."""
        self.stalled = False
        """Accept every call and never answer it (until `stop`), as a kube-apiserver that hangs does."""
        self._unstall = asyncio.Event()
        self.token_reviews: list[dict[str, Any]] = []
        self.access_reviews: list[dict[str, Any]] = []
        self.config_map_reads = 0
        self.endpoint_slices: list[dict[str, Any]] = []
        """EndpointSlice objects (`discovery.k8s.io/v1` JSON) that lists return, by namespace and labels."""
        self.slice_lists: list[tuple[str | None, dict[str, str]]] = []
        """Every EndpointSlice list: its namespace (`None`: all) and query parameters."""
        self.stalled_calls = 0
        # The adapter's own credential towards the kube-apiserver (its service account token).
        self.client_token = secrets.token_urlsafe(16)
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.kubeconfig = Path()

    async def start(self, directory: Path) -> Path:
        """Listen on a free port over TLS; write and return a kubeconfig that reaches it."""
        app = web.Application(middlewares=[self._authenticate_client])
        app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", self._token_review)
        app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", self._access_review)
        app.router.add_get("/api/v1/namespaces/{namespace}/configmaps/{name}", self._config_map)
        app.router.add_get("/apis/discovery.k8s.io/v1/endpointslices", self._list_slices)
        app.router.add_get(
            "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices", self._list_slices
        )
        server = self.ca.issue("kube-apiserver", server=True)
        cert, key = server.write(directory, "kube-apiserver")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"https://127.0.0.1:{port}"
        kubeconfig = directory / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "fake",
                            "cluster": {
                                "server": self.url,
                                "certificate-authority-data": base64.b64encode(self.ca.cert_pem).decode(),
                            },
                        }
                    ],
                    "users": [{"name": "adapter", "user": {"token": self.client_token}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "adapter"}}],
                    "current-context": "fake",
                }
            )
        )
        return kubeconfig

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, directory: Path) -> AsyncIterator[FakeKubeAPI]:
        """A started fake (with its own CA) whose kubeconfig is `kubeconfig`; stopped on exit."""
        kube = cls(CA("kube-apiserver-ca"))
        kube.kubeconfig = await kube.start(directory)
        try:
            yield kube
        finally:
            await kube.stop()

    @contextlib.asynccontextmanager
    async def client(self, *, request_timeout: float = 5.0) -> AsyncIterator[KubeClient]:
        """The adapter's `KubeClient`, connected through `kubeconfig` as in a cluster; closed on exit."""
        client = await KubeClient.connect(str(self.kubeconfig), request_timeout=request_timeout)
        try:
            yield client
        finally:
            await client.close()

    async def stop(self) -> None:
        # Stalled calls end first, so the server's shutdown does not wait for them.
        self._unstall.set()
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _authenticate_client(self, request: web.Request, handler: Any) -> web.StreamResponse:
        response: web.StreamResponse
        if self.stalled:
            self.stalled_calls += 1
            await self._unstall.wait()
            response = _status(503, "ServiceUnavailable", "stopped while stalled")
        elif self.failing:
            response = _status(500, "InternalError", "etcdserver: request timed out")
        elif request.headers.get("Authorization") != f"Bearer {self.client_token}":
            response = _status(401, "Unauthorized", "Unauthorized")
        else:
            response = await handler(request)
        # One request per connection: the server closes each one itself, so none outlives stop().
        response.force_close()
        return response

    async def _token_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.token_reviews.append(body)
        user = self.tokens.get(body["spec"]["token"])
        status: dict[str, Any] = (
            {"authenticated": True, "user": user}
            if user
            else {"authenticated": False, "error": "invalid bearer token"}
        )
        return web.json_response({**body, "status": status}, status=201)

    async def _access_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.access_reviews.append(body["spec"])
        allowed = any(_matches(grant, body["spec"]) for grant in self.grants)
        status = {"allowed": allowed, "reason": "RBAC: allowed by fake grant" if allowed else ""}
        return web.json_response({**body, "status": status}, status=201)

    async def _config_map(self, request: web.Request) -> web.Response:
        self.config_map_reads += 1
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        if (namespace, name) != (
            "kube-system",
            "extension-apiserver-authentication",
        ) or self.config_map is None:
            return _status(404, "NotFound", f'configmaps "{name}" not found')
        return web.json_response(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace},
                "data": self.config_map,
            }
        )

    async def _list_slices(self, request: web.Request) -> web.Response:
        namespace = request.match_info.get("namespace")
        self.slice_lists.append((namespace, dict(request.query)))
        # Equality requirements only (`a=b,c=d`): what the adapter's discovery selector uses.
        wanted = dict(
            term.split("=", 1) for term in request.query.get("labelSelector", "").split(",") if term
        )
        matching = [
            piece
            for piece in self.endpoint_slices
            if namespace in (None, piece["metadata"].get("namespace"))
            and wanted.items() <= piece["metadata"].get("labels", {}).items()
        ]
        # Pages as the kube-apiserver cuts them: `limit` items, then a `continue` token.
        start = int(request.query.get("continue") or 0)
        end = start + int(request.query.get("limit") or len(matching) or 1)
        metadata = {"resourceVersion": "1"} | ({"continue": str(end)} if end < len(matching) else {})
        return web.json_response(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSliceList",
                "metadata": metadata,
                "items": matching[start:end],
            }
        )

    def subjects_reviewed(self) -> list[str]:
        """The users of every SubjectAccessReview so far, in order."""
        return [spec.get("user", "") for spec in self.access_reviews]


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        },
        status=code,
    )
