"""The adapter inside the demo: the real application on the scrape source, served on a free loopback port.

Its targets are the fleet's Ready replicas, which is what EndpointSlice discovery gives in a cluster:
a replica in its cold start refuses connections and would otherwise fail every scrape round.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Final, Protocol

from aiohttp import web

from adapter.app import create_app
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import Config, load
from adapter.sources import Source
from adapter.sources.discovery import Target, static_target
from adapter.sources.scrape import ScrapeSource
from adapter.telemetry import Telemetry

# Everything shares one event loop in the demo, so a busy machine delays a page more than a network
# would: each scrape gets most of the interval, and a value goes stale only after several missed rounds.
_TIMEOUT_FRACTION: Final = 0.9
_STALE_ROUNDS: Final = 8


class Served(Protocol):
    """A replica whose `/metrics` the adapter scrapes."""

    @property
    def metrics_url(self) -> str: ...


class Fleet(Protocol):
    """Replicas, some of them Ready: the demo's `EmulatedFleet`, or a rehearsal's engine processes."""

    @property
    def ready_replicas(self) -> Sequence[Served]: ...


class FleetDiscovery:
    """A `Discovery` listing the fleet's Ready replicas (an EndpointSlice's ready endpoints)."""

    interval = 0.0  # the list is in memory: refresh before every scrape round

    def __init__(self, fleet: Fleet, namespace: str) -> None:
        self.fleet = fleet
        self.namespace = namespace
        self.scope = f"the Ready replicas of the emulated fleet in namespace {namespace!r}"

    def want(self, namespace: str | None) -> bool:
        """Every namespace is already known: the fleet lives in one."""
        return False

    async def refresh(self) -> None:
        """Nothing to fetch: `targets` reads the fleet directly."""

    def targets(self) -> tuple[Target, ...]:
        """One target per Ready replica, labelled like a static target of the namespace."""
        return tuple(
            static_target(r.metrics_url, self.namespace, "/metrics") for r in self.fleet.ready_replicas
        )


def adapter_config(namespace: str, scrape_interval: float) -> Config:
    """The adapter's configuration: scrape source, plain HTTP on loopback (DESIGN.md §4)."""
    return load(
        None,
        {
            "source": "scrape",
            "scrape.interval": scrape_interval,
            "scrape.timeout": scrape_interval * _TIMEOUT_FRACTION,
            "scrape.max_age": scrape_interval * _STALE_ROUNDS,
            "scrape.namespace": namespace,
            "server.address": "127.0.0.1",
            "server.insecure_serving": True,
            "logging.level": "warning",
        },
    )


@contextlib.asynccontextmanager
async def serve_adapter(
    fleet: Fleet,
    namespace: str,
    scrape_interval: float,
    *,
    config: Config | None = None,
    route: Callable[[ScrapeSource], Source] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> AsyncIterator[str]:
    """Run the adapter for `fleet` until the block exits; yields its base URL.

    `config` replaces `adapter_config` (its `scrape` section still drives the fleet's scrape source),
    and `route` puts a source in front of the scrape source, for metrics that are not the fleet's
    (the upstream queue's, `lab.queue.source`). `clock` is the event loop's (`lab.virtual_time`)."""
    config = config or adapter_config(namespace, scrape_interval)
    telemetry = Telemetry()
    source = ScrapeSource(
        config.scrape,
        config.catalogue(),
        discovery=FleetDiscovery(fleet, namespace),
        observe=lambda outcome, seconds: telemetry.observe_upstream("scrape", outcome, seconds),
        wall=clock.wall,
        monotonic=clock.monotonic,
    )
    served = source if route is None else route(source)
    runner = web.AppRunner(
        create_app(config, source=served, telemetry=telemetry, clock=clock), access_log=None
    )
    await runner.setup()
    # Binding port 0 ourselves gives a free port with no window for another process to take it.
    sock = socket.socket()
    try:
        sock.bind((config.server.address, 0))
        await web.SockSite(runner, sock).start()
        yield f"http://{config.server.address}:{sock.getsockname()[1]}"
    finally:
        await runner.cleanup()
        sock.close()
