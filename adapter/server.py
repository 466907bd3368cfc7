"""Serving the assembled application: plain HTTP on loopback, or TLS with authentication.

`serve_config` is the one entry point: it checks the serving mode, builds the application from the
configuration (with the security middleware unless insecure) and runs it until an event is set.
With a KEDA port it also serves the external scaler (gRPC) on the same event loop, from the same
provider: over TLS with the same serving certificate (mutual TLS with `--client-ca-file`), or plain
when `--insecure-serving` (loopback only, as for HTTP).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc
from aiohttp import web

from adapter import api
from adapter.app import connect_kube, create_app, lists_endpoint_slices
from adapter.config import Config
from adapter.errors import ConfigError
from adapter.keda.credentials import ScalerCredentials
from adapter.keda.servicer import ExternalScaler
from adapter.keda.serving import serve_scaler
from adapter.kube import KubeClient
from adapter.security.serving import SecureServing, secure_serving
from adapter.sources import Source

log = logging.getLogger("adapter")


def is_loopback(address: str) -> bool:
    """Whether an address (IP or `localhost`) is a loopback address."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_serving(config: Config) -> None:
    """Refuse to serve without TLS unless explicitly insecure and on loopback; TLS needs a certificate."""
    security = config.security
    has_files = security.tls_cert_file is not None or security.tls_private_key_file is not None
    if config.server.insecure_serving:
        if not is_loopback(config.server.address):
            raise ConfigError(
                f"--insecure-serving refuses address {config.server.address!r}; it binds only loopback "
                "(127.0.0.1, ::1, localhost)"
            )
        if has_files or security.self_signed:
            raise ConfigError(
                "--insecure-serving cannot be combined with --tls-cert-file, --tls-private-key-file or --self-signed"
            )
        return
    if (security.tls_cert_file is None) != (security.tls_private_key_file is None):
        raise ConfigError("--tls-cert-file and --tls-private-key-file must be set together")
    if security.self_signed and has_files:
        raise ConfigError("--self-signed cannot be combined with --tls-cert-file/--tls-private-key-file")
    if not security.self_signed and not has_files:
        raise ConfigError(
            "serving needs a certificate: --tls-cert-file and --tls-private-key-file, or --self-signed "
            "(or --insecure-serving on loopback for local use)"
        )


@dataclass(frozen=True)
class Keda:
    """The KEDA external scaler to serve beside the HTTP API (`serve --keda-port`)."""

    port: int
    """gRPC port; 0 asks the kernel for a free one (tests)."""
    on_bound: Callable[[int], None] | None = None
    """Called with the port actually bound."""


def check_keda(config: Config, keda: Keda | None) -> None:
    """Refuse a KEDA port that cannot work beside the HTTP port."""
    if keda is None:
        return
    if not 0 <= keda.port <= 65535:
        raise ConfigError(f"--keda-port {keda.port!r} must be a TCP port (1-65535)")
    if keda.port != 0 and keda.port == config.server.port:
        raise ConfigError(f"--keda-port {keda.port} must differ from the HTTP port ('server.port', --port)")


@contextlib.asynccontextmanager
async def _scaler(
    config: Config, app: web.Application, keda: Keda, secure: SecureServing | None
) -> AsyncIterator[None]:
    """Serve the external scaler over the application's provider while the context is open."""
    scaler = ExternalScaler(app[api.PROVIDER], app[api.TELEMETRY], refresh_interval=config.refresh_interval)
    credentials: grpc.ServerCredentials | None = None
    watcher: asyncio.Task[None] | None = None
    if secure is not None:
        serving = secure.serving
        tls = await ScalerCredentials.load(lambda: serving.pair, config.security.client_ca_file)
        credentials = tls.server_credentials()
        watcher = asyncio.create_task(tls.watch(config.security.tls_reload_interval))
        if not tls.mutual:
            log.warning(
                "the KEDA port authenticates no client: anyone who can reach it may read metric values; "
                "set --client-ca-file to require KEDA's client certificate (mutual TLS)"
            )
    try:
        async with serve_scaler(scaler, config.server.address, keda.port, credentials) as port:
            if keda.on_bound is not None:
                keda.on_bound(port)
            yield
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


async def serve(
    config: Config,
    app: web.Application,
    stop: asyncio.Event,
    *,
    ssl_context: ssl.SSLContext | None = None,
    on_bound: Callable[[int], None] | None = None,
    keda: Keda | None = None,
    secure: SecureServing | None = None,
) -> None:
    """Run `app` until `stop` is set; over TLS with `ssl_context`. `on_bound` gets the bound port.

    With `keda`, the external scaler is served too, over TLS when `secure` is given; it stops first
    (its streams end cleanly) and the HTTP side after it.
    """
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, config.server.address, config.server.port, ssl_context=ssl_context)
        await site.start()
        # The port actually bound: `server.port: 0` asks the kernel for a free one (tests).
        port = int(runner.addresses[0][1])
        log.info(
            "serving external.metrics.k8s.io/v1beta1",
            extra={"address": config.server.address, "port": port, "source": config.source,
                   "tls": ssl_context is not None, "metrics": [m.name for m in config.catalogue()]},
        )  # fmt: skip
        async with contextlib.AsyncExitStack() as stack:
            if keda is not None:
                await stack.enter_async_context(_scaler(config, app, keda, secure))
            if on_bound is not None:
                on_bound(port)
            await stop.wait()
    finally:
        await runner.cleanup()


async def serve_config(
    config: Config,
    stop: asyncio.Event,
    *,
    source: Source | None = None,
    on_bound: Callable[[int], None] | None = None,
    keda: Keda | None = None,
) -> None:
    """Assemble the adapter `config` describes (TLS, authentication, authorization) and serve it until `stop`."""
    check_serving(config)
    check_keda(config, keda)
    # One Kubernetes client for authentication and EndpointSlice discovery alike (the same
    # kubeconfig, identity and deadline), connected only when one of them needs it.
    async with contextlib.AsyncExitStack() as stack:
        kube: KubeClient | None = None
        if not config.server.insecure_serving or (source is None and lists_endpoint_slices(config)):
            kube = await connect_kube(config)
            stack.push_async_callback(kube.close)  # after the app (and its source) stopped
        if kube is None or config.server.insecure_serving:
            log.warning("serving plain HTTP without authentication (--insecure-serving): for local use only")
            app = create_app(config, source=source, kube=kube)
            await serve(config, app, stop, on_bound=on_bound, keda=keda)
            return
        secure = await stack.enter_async_context(secure_serving(config.security, kube))
        app = create_app(config, source=source, kube=kube, middlewares=(secure.middleware,))
        await serve(
            config, app, stop, ssl_context=secure.ssl_context, on_bound=on_bound, keda=keda, secure=secure
        )
