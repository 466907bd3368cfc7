"""Secure serving assembled: the TLS context, who is asking, and whether they may.

`secure_serving(settings, kube)` yields a `SecureServing` whose `ssl_context` the server listens
with and whose `middleware` goes to `create_app(..., middlewares=(...))`. Behind them, one
background task re-reads the certificate and CA files (and the cluster's authentication ConfigMap)
and swaps in what changed. `kube` is the process's one Kubernetes client, which the server's
assembly connects (and closes) and EndpointSlice discovery shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from adapter.config import SecuritySettings
from adapter.errors import AdapterError, CertificateError, ConfigError
from adapter.kube import KubeClient
from adapter.security import clusterauth, tls
from adapter.security.access import make_middleware
from adapter.security.authn import Authenticator, RequestHeaderConfig
from adapter.security.authz import Authorizer, PathPatterns
from adapter.security.certauth import CertificateAuthority
from adapter.security.clusterauth import ClusterAuthentication

log = logging.getLogger(__name__)

# The front-proxy CA rotates rarely and the ConfigMap read costs a kube-apiserver call: once a minute.
CLUSTER_AUTHENTICATION_REFRESH_SECONDS: Final = 60.0


@dataclass(frozen=True)
class _Material:
    """Everything the TLS context and the certificate authenticators are built from."""

    pair: tls.KeyPair
    client_ca_pem: bytes
    requestheader_ca_pem: bytes
    cluster: ClusterAuthentication | None


class SecureServing:
    """The TLS context and the middleware, kept current by `refresh`."""

    def __init__(self, settings: SecuritySettings, kube: KubeClient, material: _Material) -> None:
        self.settings = settings
        self.kube = kube
        self._material = material
        self._cluster_read_at = time.monotonic()
        requestheader, client_ca = _authorities(settings, material)
        self.serving = tls.ServingContext(material.pair, _union(material))
        self.authenticator = Authenticator(
            requestheader=requestheader,
            client_ca=client_ca,
            tokens=kube,
            token_ttl=settings.token_cache_ttl,
        )
        self.authorizer = Authorizer(
            kube, allowed_ttl=settings.authorized_cache_ttl, denied_ttl=settings.unauthorized_cache_ttl
        )
        paths = settings.authorization_always_allow_paths
        if not settings.authorize_metrics:
            paths = (*paths, "/metrics")
        self.middleware = make_middleware(self.authenticator, self.authorizer, PathPatterns(paths))

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """The context to listen with; it follows every reload."""
        return self.serving.context

    @classmethod
    async def start(cls, settings: SecuritySettings, kube: KubeClient) -> SecureServing:
        """Load the initial material (through `kube`, which
        stays the caller's); `ConfigError` says what is wrong."""
        try:
            PathPatterns(settings.authorization_always_allow_paths)
        except ValueError as exc:
            raise ConfigError(f"config key 'security.authorization_always_allow_paths': {exc}") from exc
        try:
            cluster = await _read_cluster(settings, kube) if _needs_cluster(settings) else None
            pair = tls.self_signed() if settings.self_signed else await _read_pair(settings)
            material = await _read_material(settings, pair, cluster)
            serving = cls(settings, kube, material)
        except (AdapterError, CertificateError, ValueError) as exc:
            raise ConfigError(str(exc)) from exc
        if settings.self_signed:
            log.warning(
                "serving a self-signed certificate generated in memory: clients cannot verify it; use "
                "--tls-cert-file/--tls-private-key-file in production",
                extra=tls.describe(pair),
            )
        else:
            log.info("serving certificate loaded", extra=tls.describe(pair))
        return serving

    async def refresh(self) -> bool:
        """Re-read what may have changed and apply it; `True` when something new is in use.

        Material that fails to load is logged and the current one is kept. A ConfigMap that cannot
        be read keeps the last one read, and does not hold back a rotated serving certificate.
        """
        old = self._material
        cluster = old.cluster
        if (
            cluster is not None
            and time.monotonic() - self._cluster_read_at >= CLUSTER_AUTHENTICATION_REFRESH_SECONDS
        ):
            try:
                cluster = await _read_cluster(self.settings, self.kube)
            except (AdapterError, ValueError) as exc:
                log.error(
                    "unable to re-read the cluster's authentication settings; keeping the last ones: %s", exc
                )
                cluster = old.cluster
            # Also after a failure: retry on the ConfigMap's schedule, not on every file check.
            self._cluster_read_at = time.monotonic()
        try:
            pair = old.pair if self.settings.self_signed else await _read_pair(self.settings)
            new = await _read_material(self.settings, pair, cluster)
            if new == old:
                return False
            requestheader, client_ca = _authorities(self.settings, new)
            self.serving.update(new.pair, _union(new))
        except (CertificateError, ValueError) as exc:
            log.error("unable to reload serving certificate or client CAs; keeping the current ones: %s", exc)
            return False
        # No await since `serving.update`: TLS and the authenticators switch together.
        self.authenticator.set_authorities(requestheader, client_ca)
        self._material = new
        if new.pair != old.pair:
            log.info("serving certificate reloaded", extra=tls.describe(new.pair))
        if (new.client_ca_pem, new.requestheader_ca_pem, new.cluster) != (
            old.client_ca_pem,
            old.requestheader_ca_pem,
            old.cluster,
        ):
            log.info("client certificate authorities reloaded")
        return True

    async def watch(self) -> None:
        """Call `refresh` every `tls_reload_interval` until cancelled; no failure ends the loop."""
        while True:
            await asyncio.sleep(self.settings.tls_reload_interval)
            try:
                await self.refresh()
            except Exception:
                # A bug here must not silently stop every future certificate rotation.
                log.exception("unexpected error reloading the serving certificate or client CAs")


@contextlib.asynccontextmanager
async def secure_serving(settings: SecuritySettings, kube: KubeClient) -> AsyncIterator[SecureServing]:
    """A started `SecureServing` whose reload loop runs while the context is open."""
    serving = await SecureServing.start(settings, kube)
    watcher = asyncio.create_task(serving.watch())
    try:
        yield serving
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


def _needs_cluster(settings: SecuritySettings) -> bool:
    return settings.client_ca_file is None or settings.requestheader_client_ca_file is None


async def _read_cluster(settings: SecuritySettings, kube: KubeClient) -> ClusterAuthentication:
    where = f"{clusterauth.CONFIGMAP_NAMESPACE}/{clusterauth.CONFIGMAP_NAME}"
    try:
        data = await kube.read_config_map(clusterauth.CONFIGMAP_NAMESPACE, clusterauth.CONFIGMAP_NAME)
    except AdapterError as error:
        raise AdapterError(
            f"{error}; the adapter needs the extension-apiserver-authentication-reader role in kube-system, "
            "or both --client-ca-file and --requestheader-client-ca-file"
        ) from error
    try:
        return clusterauth.parse_cluster_authentication(data)
    except ValueError as exc:
        raise ValueError(f"unable to parse configmap {where}: {exc}") from exc


async def _read_pair(settings: SecuritySettings) -> tls.KeyPair:
    assert settings.tls_cert_file is not None and settings.tls_private_key_file is not None
    return await asyncio.to_thread(tls.read_key_pair, settings.tls_cert_file, settings.tls_private_key_file)


def _read_file(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CertificateError(f"unable to read {what} {path!r}: {exc.strerror}") from exc


async def _read_material(
    settings: SecuritySettings, pair: tls.KeyPair, cluster: ClusterAuthentication | None
) -> _Material:
    def read() -> _Material:
        client_ca = (
            _read_file(settings.client_ca_file, "client CA file")
            if settings.client_ca_file
            else (cluster.client_ca_pem if cluster else b"")
        )
        requestheader_ca = (
            _read_file(settings.requestheader_client_ca_file, "requestheader client CA file")
            if settings.requestheader_client_ca_file
            else (cluster.requestheader_ca_pem if cluster else b"")
        )
        return _Material(pair, client_ca, requestheader_ca, cluster)

    return await asyncio.to_thread(read)


def _union(material: _Material) -> bytes:
    return material.client_ca_pem.strip() + b"\n" + material.requestheader_ca_pem.strip() + b"\n"


def _authorities(
    settings: SecuritySettings, material: _Material
) -> tuple[RequestHeaderConfig | None, CertificateAuthority | None]:
    client_ca = (
        CertificateAuthority.from_pem(material.client_ca_pem, "client CA")
        if material.client_ca_pem.strip()
        else None
    )
    return clusterauth.requestheader_config(
        settings, material.requestheader_ca_pem, material.cluster
    ), client_ca
