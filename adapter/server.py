"""Serving the assembled application: plain HTTP on loopback, or TLS with authentication.

`serve_config` is the one entry point: it checks the serving mode, builds the application from the
configuration (with the security middleware unless insecure) and runs it until an event is set.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
from collections.abc import Callable

from aiohttp import web

from adapter.app import create_app
from adapter.config import Config
from adapter.errors import ConfigError
from adapter.security import secure_serving
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


async def serve(
    config: Config,
    app: web.Application,
    stop: asyncio.Event,
    *,
    ssl_context: ssl.SSLContext | None = None,
    on_bound: Callable[[int], None] | None = None,
) -> None:
    """Run `app` until `stop` is set; over TLS with `ssl_context`. `on_bound` gets the bound port."""
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
) -> None:
    """Assemble the adapter `config` describes (TLS, authentication, authorization) and serve it until `stop`."""
    check_serving(config)
    if config.server.insecure_serving:
        log.warning("serving plain HTTP without authentication (--insecure-serving): for local use only")
        await serve(config, create_app(config, source=source), stop, on_bound=on_bound)
        return
    async with secure_serving(config.security) as secure:
        app = create_app(config, source=source, middlewares=(secure.middleware,))
        await serve(config, app, stop, ssl_context=secure.ssl_context, on_bound=on_bound)
