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
import gc
import ipaddress
import logging
import os
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc
from aiohttp import web

from adapter.api import routes as api
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


def freeze_start_up_heap() -> None:
    """Move every object alive after start-up (modules, classes, the catalogue: about 76,000) out of
    the garbage collector's reach for good.

    A full collection walks every tracked object, and the start-up heap alone is 16 ms of it: one
    that falls in a request's way (at any key count) costs that request more than the rest of its
    answer. Frozen, those objects are never walked again; a full collection walks what the keys
    hold, which is freed as the keys go. Garbage is collected first, so none of it is kept forever.
    See https://docs.python.org/3/library/gc.html#gc.freeze
    """
    gc.collect()
    gc.freeze()


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
                "--insecure-serving cannot be combined with "
                "--tls-cert-file, --tls-private-key-file or --self-signed"
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


#: the files serving reads at start-up: flag, setting, and the PEM block each must hold (None: any content)
_FILES = (
    ("--tls-cert-file", "tls_cert_file", "CERTIFICATE"),
    ("--tls-private-key-file", "tls_private_key_file", "PRIVATE KEY"),
    ("--client-ca-file", "client_ca_file", "CERTIFICATE"),
    ("--requestheader-client-ca-file", "requestheader_client_ca_file", "CERTIFICATE"),
    ("--kubeconfig", "kubeconfig", None),
)


def check_files(config: Config) -> None:
    """Refuse a certificate, key, CA or kubeconfig file that cannot be read, naming its flag.

    Checked before anything connects, so a typo in a path is reported as itself, not as whatever
    the first step that needed the file (the kube-apiserver connection, say) made of it; and a file
    without the PEM block it must hold (a key given for a certificate, a DER file) is named as such
    rather than as OpenSSL's "PEM lib". The full parse stays with the TLS code.
    """
    for flag, name, block in _FILES:
        path = getattr(config.security, name)
        if path is None:
            continue
        where = f"{flag} ('security.{name}') {path!r}"
        try:
            with open(path, "rb") as file:
                content = file.read()
        except OSError as exc:
            raise ConfigError(f"{where}: unable to read it: {exc.strerror or exc}") from exc
        # "PRIVATE KEY" also matches "EC PRIVATE KEY" and "RSA PRIVATE KEY" (PKCS#1 and SEC 1 keys).
        if block is not None and f"{block}-----".encode() not in content:
            raise ConfigError(f"{where}: holds no PEM {block} block (-----BEGIN ...{block}-----)")


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


def check_ports(config: Config, keda: Keda | None) -> None:
    """Refuse a listening port that is already taken, before anything starts, in one line.

    Without this a taken HTTP port is found only after the source has started, and a taken KEDA
    port only after the HTTP server is up, where gRPC says "Failed to bind" and logs on its own.
    Port 0 (the kernel's choice) needs no probe.
    """
    ports = [("--address, --port", config.server.port, "")]
    if keda is not None:
        ports.append(("--keda-port", keda.port, " for the KEDA external scaler"))
    family = socket.AF_INET6 if ":" in config.server.address else socket.AF_INET
    for flags, port, what in ports:
        if port == 0:
            continue
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp and gRPC bind
            try:
                probe.bind((config.server.address, port))
            except OSError as exc:
                where = f"{config.server.address}:{port}"
                raise ConfigError(f"unable to listen on {where}{what} ({flags}): {_reason(exc)}") from exc


def _reason(error: OSError) -> str:
    """The system's words for a failed bind ("Address already in use"), without asyncio's wrapping."""
    return os.strerror(error.errno) if error.errno else str(error)


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
        async with contextlib.AsyncExitStack() as stack:
            try:
                port = await stack.enter_async_context(
                    serve_scaler(scaler, config.server.address, keda.port, credentials)
                )
            except OSError as exc:
                # Taken between `check_keda`'s probe and now: gRPC says only "Failed to bind".
                raise ConfigError(
                    f"unable to listen on {config.server.address}:{keda.port} for the KEDA external scaler "
                    "(--keda-port): the port is in use or not allowed"
                ) from exc
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
        try:
            await site.start()
        except OSError as exc:
            where = f"{config.server.address}:{config.server.port}"
            raise ConfigError(f"unable to listen on {where} (--address, --port): {_reason(exc)}") from exc
        # The port actually bound: `server.port: 0` asks the kernel for a free one (tests).
        port = int(runner.addresses[0][1])
        freeze_start_up_heap()
        log.info(
            "serving external.metrics.k8s.io/v1beta1",
            extra={
                "address": config.server.address,
                "port": port,
                "source": config.source,
                "tls": ssl_context is not None,
                "metrics": [m.name for m in config.catalogue()],
            },
        )
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
    """Assemble the adapter `config` describes (TLS,
    authentication, authorization) and serve it until `stop`."""
    check_serving(config)
    check_files(config)
    check_keda(config, keda)
    check_ports(config, keda)
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
