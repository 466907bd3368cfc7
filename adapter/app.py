"""The application factory: one place that assembles config, source, cache, provider and routes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Final

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from adapter.api import health, openapi
from adapter.api import routes as api
from adapter.cache import Outcome, ValueCache
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import Config
from adapter.errors import AdapterError, ConfigError, KubeConfigError, PathNotFound
from adapter.provider import CachedProvider
from adapter.sources import Sample, Source
from adapter.telemetry import Telemetry

if TYPE_CHECKING:
    from adapter.kube import KubeClient

log = logging.getLogger(__name__)

SOURCE: Final = web.AppKey("source", Source)
CONFIG: Final = web.AppKey("config", Config)
# Between readiness pings while the source has never answered; short, so a pod becomes Ready soon.
_READY_RETRY_SECONDS: Final = 1.0


def lists_endpoint_slices(config: Config) -> bool:
    """Whether the source `config` names discovers pods from EndpointSlices (so needs a `KubeClient`)."""
    return config.source == "scrape" and not config.scrape.targets


async def connect_kube(config: Config) -> KubeClient:
    """The process's one Kubernetes client (`security.kubeconfig`, else in-cluster); the caller closes it.

    Authentication and EndpointSlice discovery share it, so they reach the same cluster with the
    same identity and deadline (`security.review_timeout`). Raises `ConfigError` naming what could
    not be loaded.
    """
    # Imported here: the `kubernetes` library takes about a second to import, which an adapter
    # that talks to no kube-apiserver (the demo's, a test's) need not pay.
    from adapter.kube import KubeClient

    try:
        return await KubeClient.connect(
            config.security.kubeconfig, request_timeout=config.security.review_timeout
        )
    except KubeConfigError as exc:
        raise ConfigError(str(exc)) from exc


def make_source(
    config: Config, telemetry: Telemetry, kube: KubeClient | None = None, *, clock: Clock = SYSTEM_CLOCK
) -> Source:
    """The source the configuration names; EndpointSlice discovery lists through `kube`. The scrape
    source starts its rounds on `clock`'s ticks (a Prometheus keeps its own time)."""
    if config.source == "prometheus":
        from adapter.sources.prometheus import PrometheusSource

        def observe(outcome: str, seconds: float) -> None:
            telemetry.observe_upstream("prometheus", outcome, seconds)

        return PrometheusSource(config.prometheus, observe=observe)
    from adapter.sources.scrape import make_scrape_source

    source: Source = make_scrape_source(config, telemetry, kube, clock=clock)
    return source


def make_provider(
    config: Config,
    source: Source,
    telemetry: Telemetry,
    *,
    on_outcome: Callable[[Outcome], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> CachedProvider:
    """The provider the configuration describes, over `source`, with its value cache, on `clock`."""
    cache = ValueCache(
        config.refresh_interval,
        config.cache.idle_timeout,
        max_keys=config.cache.max_keys,
        on_outcome=on_outcome,
        monotonic=clock.monotonic,
        wall=clock.wall,
    )
    return CachedProvider(
        config.catalogue(),
        source,
        cache,
        default_max_age=config.default_max_age,
        telemetry=telemetry,
        wall=clock.wall,
    )


@contextlib.asynccontextmanager
async def started_provider(
    config: Config,
    telemetry: Telemetry | None = None,
    kube: KubeClient | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
) -> AsyncIterator[CachedProvider]:
    """The source and provider `serve` builds from `config`, the source started, both closed on exit:
    the adapter without its HTTP layer (`query`, and checks that read it as the HPA would), on `clock`
    (the lab's virtual-time runs pass theirs)."""
    telemetry = telemetry or Telemetry()
    source = make_source(config, telemetry, kube, clock=clock)
    provider = make_provider(config, source, telemetry, clock=clock)
    await source.start()
    try:
        yield provider
    finally:
        await provider.cache.close()
        await source.close()


@web.middleware
async def status_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves as a Kubernetes `Status`, including unknown paths and our own bugs."""
    try:
        return await handler(request)
    except AdapterError as error:
        return api.status_response(error)
    except web.HTTPNotFound:
        return api.status_response(PathNotFound(request.path))
    except web.HTTPException:
        raise
    except Exception:
        log.exception("unhandled error serving %s", request.path)
        return api.status_response(AdapterError("unhandled"))


def create_app(
    config: Config,
    *,
    source: Source | None = None,
    telemetry: Telemetry | None = None,
    middlewares: tuple[Middleware, ...] = (),
    kube: KubeClient | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> web.Application:
    """Build the adapter application. Tests pass their own `source`; production builds one from config
    (EndpointSlice discovery through `kube`, which the caller owns and closes after the app). `clock`
    dates and ages the values (the lab's virtual-time runs pass theirs)."""
    telemetry = telemetry or Telemetry()
    app = web.Application(middlewares=[status_errors, *middlewares])
    ready = asyncio.Event()
    the_source = source or make_source(config, telemetry, kube, clock=clock)

    def on_outcome(outcome: Outcome) -> None:
        if isinstance(outcome, Sample) and not ready.is_set():
            ready.set()
            telemetry.ready.set(1)

    provider = make_provider(config, the_source, telemetry, on_outcome=on_outcome, clock=clock)
    cache = provider.cache
    app[CONFIG] = config
    app[SOURCE] = the_source
    app[api.PROVIDER] = provider
    app[api.TELEMETRY] = telemetry
    app[health.READY] = ready

    async def source_context(app: web.Application) -> AsyncIterator[None]:
        await the_source.start()
        pinger = asyncio.create_task(_ping_until_ready(the_source, ready, telemetry))
        yield
        pinger.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pinger
        await cache.close()
        await the_source.close()

    app.cleanup_ctx.append(source_context)
    api.add_routes(app)
    openapi.add_routes(app)
    health.add_routes(app)
    return app


async def _ping_until_ready(source: Source, ready: asyncio.Event, telemetry: Telemetry) -> None:
    while not ready.is_set():
        try:
            await source.ping()
        except AdapterError as error:
            log.info("metrics source not answering yet: %s", error)
        else:
            ready.set()
            telemetry.ready.set(1)
            log.info("metrics source answered; ready", extra={"source": source.name})
            return
        await asyncio.sleep(_READY_RETRY_SECONDS)
