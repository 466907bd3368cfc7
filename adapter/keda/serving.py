"""Running the external scaler: a `grpc.aio` server on the event loop the HTTP API runs on."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Final

import grpc

from adapter.keda import externalscaler_pb2_grpc as rpc
from adapter.keda.servicer import ExternalScaler

log = logging.getLogger(__name__)

#: how long in-flight calls may finish at shutdown; cached answers take microseconds, and open
#: streams end at once when the servicer closes, so only a first fetch of a new key can be cut short
STOP_GRACE_SECONDS: Final = 2.0
_OPTIONS: Final = (
    # gRPC sets SO_REUSEPORT by default, which would let a second adapter bind the same port and
    # silently take half of KEDA's connections; a taken port must be an error instead.
    ("grpc.so_reuseport", 0),
)


def listen_address(address: str, port: int) -> str:
    """`host:port` as gRPC parses it (IPv6 literals in brackets)."""
    return f"[{address}]:{port}" if ":" in address and not address.startswith("[") else f"{address}:{port}"


@contextlib.asynccontextmanager
async def serve_scaler(
    scaler: ExternalScaler, address: str, port: int, credentials: grpc.ServerCredentials | None
) -> AsyncIterator[int]:
    """Serve `scaler` on `address:port` (plain when `credentials` is None) and yield the bound port.

    On exit, open streams are ended cleanly (status OK, so KEDA reconnects at once, to another replica
    if this one is going away) and in-flight calls get `STOP_GRACE_SECONDS` to finish.
    """
    server = grpc.aio.server(options=_OPTIONS)
    rpc.add_ExternalScalerServicer_to_server(scaler, server)
    target = listen_address(address, port)
    try:
        bound = (
            server.add_secure_port(target, credentials) if credentials else server.add_insecure_port(target)
        )
    except RuntimeError as exc:  # grpcio raises on a failed bind; older versions returned 0
        raise OSError(f"unable to bind the KEDA external scaler to {target}: {exc}") from exc
    if bound == 0:
        raise OSError(f"unable to bind the KEDA external scaler to {target}")
    await server.start()
    log.info(
        "serving the KEDA external scaler (externalscaler.ExternalScaler)",
        extra={"address": address, "port": bound, "tls": credentials is not None},
    )
    try:
        yield bound
    finally:
        scaler.close()
        await server.stop(STOP_GRACE_SECONDS)
