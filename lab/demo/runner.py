"""The whole autoscaling loop in one process: emulated fleet, adapter, load and HPA model.

```
 Traffic ──► Gateway (counts arrivals) ──► EmulatedFleet (round-robin over Ready replicas, like a Service)
    │                         │ /metrics of Ready replicas (an EndpointSlice's view)
    └─ or, zero-idle: ──► Upstream queue ──► one consumer per Ready replica ──► its replica
                              │ /metrics of the queue exporter (CloudWatch names)
                              ▼
                 adapter (create_app, scrape source [+ PromQL stand-in], plain HTTP, free loopback port)
                              │ GET /apis/external.metrics.k8s.io/v1beta1/namespaces/…/<metric>
                              ▼
               HPALoop (lab.hpa) every sync period ──► Deployment.scale_to
                                                       (cold start, preStop, graceful stop)

 Observer every tick ──► Tick ──► LiveView, then the report (CSV, PNG, summary)
```

One module per part: `timeline` (emulated time), `deployment`, `traffic` (+ `request_log`),
`upstream` (the queue), `hpa_loop`, `observe`; this one composes them. Every duration is in emulated
seconds on the fleet's `ScaledClock`, which reads the event loop's clock: virtual time by default
(`lab.virtual_time`: the run is the same for a seed on any machine), the wall clock with `--real-time`.
The adapter reads the same loop's clock (`loop_clock`). A run that may scale to zero also plays the same
traffic, at the same time on its own fleet, with minReplicas 1: the baseline its GPU-replica-hours are
held to.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import logging
import time
from collections.abc import AsyncIterator
from typing import TextIO

import aiohttp

from adapter.vocabulary.catalogue import FORECAST_WINDOW_SECONDS
from lab import virtual_time
from lab.demo.capacity import measure_capacity
from lab.demo.cluster.deployment import Deployment
from lab.demo.cluster.embedded import serve_adapter
from lab.demo.cluster.gateway import Gateway
from lab.demo.cluster.hpa_loop import HPALoop
from lab.demo.cluster.metrics_client import ExternalMetricsClient
from lab.demo.cluster.pages import PageSource, RoutedSource, stand_in_config
from lab.demo.cluster.traffic import Traffic
from lab.demo.cluster.upstream import QUEUE_METRICS, Upstream
from lab.demo.decision.choice import DayBacktest, apply, backtest_day, comparison
from lab.demo.demand import METRIC as DEMAND_METRIC
from lab.demo.demand import DemandCap
from lab.demo.describe import banner, describe, first_target, hpa_text
from lab.demo.observe import Observer
from lab.demo.report import write_report
from lab.demo.request_log import RequestLog
from lab.demo.settings import DIRECT_METRIC, FORECAST_METRIC, QUEUE_METRIC, DemoSettings
from lab.demo.summary import Summary, replica_hours
from lab.demo.timeline import Timeline
from lab.demo.view import LiveView
from lab.emulator import EmulatedFleet
from lab.hpa import ControllerSettings, ExternalMetric, HorizontalController, HPASpec, admit, cluster_features
from lab.queue import serve_exporter, serve_page
from lab.records import Tick
from lab.virtual_time import loop_clock, loop_time

log = logging.getLogger(__name__)

#: The replica floor a scale-to-zero run is compared with.
BASELINE_MIN_REPLICAS = 1


class Demo:
    """One run; `run()` drives it to the end and writes the report."""

    def __init__(
        self,
        settings: DemoSettings,
        stream: TextIO,
        *,
        capacity: float | None = None,
        day: DayBacktest | None = None,
    ) -> None:
        self.settings = settings
        self.stream = stream
        self.day = day
        """The same day backtested, for the summary's comparison (`None`: none)."""
        self.capacity = capacity or settings.capacity or measure_capacity(settings.params, seed=settings.seed)
        self.target = settings.target_value(self.capacity)
        self.fleet = EmulatedFleet(
            model="demo-model",
            params=settings.params,
            load_delay=settings.load_delay,
            time_scale=settings.scale,
            seed=settings.seed,
            monotonic=loop_time,
        )
        self.timeline = Timeline(self.fleet.clock)
        queue = settings.upstream
        self.upstream = None if queue is None else Upstream(queue, self.fleet)
        self.deployment = Deployment(self.fleet, hooks=self.upstream)
        self.requests = RequestLog()
        self.gateway = Gateway(
            self.fleet if self.upstream is None else self.upstream, cluster=self.fleet.model
        )
        self.demand = (
            DemandCap(settings.demand_utilisation * self.capacity)
            if settings.metric_name == DEMAND_METRIC
            else None
        )
        self.traffic = Traffic(
            self.gateway,
            self.timeline,
            self.requests,
            profile=settings.profile,
            capacity=self.capacity,
            vocab_size=settings.params.vocab_size,
            seed=settings.seed,
            poison=0.0 if queue is None else queue.poison,
            poison_tokens=settings.params.max_model_len + 1,
        )
        self.controller = HorizontalController(
            self.hpa_spec(),
            ControllerSettings(
                settings.sync_period,
                settings.tolerance,
                settings.stabilization,
                kubernetes_version=settings.kubernetes_version,
            ),
        )
        # The API server's admission: minReplicas 0 needs HPAScaleToZero (on by default from 1.37).
        admit(self.controller.spec, cluster_features(settings.kubernetes_version))

    def hpa_spec(self) -> HPASpec:
        """The HorizontalPodAutoscaler under test. Scaling on the queue, it also scales on in-flight
        requests: while the consumers keep up, the visible queue is empty even though every replica is
        busy, and the queue alone would take them away. At zero replicas the in-flight metric has no
        target to read; the HPA then follows the queue, which is Kubernetes' rule for a failed metric
        beside a valid one that does not scale down."""
        s = self.settings
        metrics = [ExternalMetric(s.metric_name, s.target_type, f"{self.target:g}")]
        if (self.upstream is not None and s.metric_name == QUEUE_METRIC) or s.metric_name == FORECAST_METRIC:
            guard = s.guard if s.guard is not None else 0.75 * s.params.max_num_seqs
            metrics.append(ExternalMetric(DIRECT_METRIC, "AverageValue", f"{guard:g}"))
        return HPASpec(
            min_replicas=s.minimum, max_replicas=s.max_replicas, metrics=tuple(metrics), behavior=s.behavior
        )

    async def run(self) -> Summary:
        """Play the profile (with its baseline, when there is one) and write the report."""
        baseline = self.baseline()
        if baseline is None:
            ticks = await self.play()
            return self.write(ticks)
        ticks, baseline_ticks = await asyncio.gather(self.play(), baseline.play())
        baseline.write(baseline_ticks)
        return self.write(ticks, baseline_hours=replica_hours(baseline_ticks))

    def baseline(self) -> Demo | None:
        """The same run with minReplicas 1, for a run that may scale to zero (else `None`)."""
        s = self.settings
        if self.upstream is None or s.minimum != 0 or not s.baseline:
            return None
        quiet = dataclasses.replace(
            s, min_replicas=BASELINE_MIN_REPLICAS, baseline=False, live=False, out=s.out / "baseline"
        )
        return Demo(quiet, io.StringIO(), capacity=self.capacity)

    async def play(self) -> list[Tick]:
        """Start everything, play the profile, stop everything; returns the ticks."""
        settings = self.settings
        view = LiveView(
            self.stream,
            metric=settings.metric_name,
            target=self.target,
            max_replicas=settings.max_replicas,
            peak_rps=settings.profile.peak * self.capacity,
            interactive=settings.live,
            slo=settings.slo,
            target_type=settings.target_type,
        )
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(self.fleet.stop)
            stack.push_async_callback(self.deployment.stopped)
            if self.upstream is not None:
                stack.push_async_callback(self.upstream.pool.stop)
            stack.push_async_callback(self.traffic.cancel)
            # The Deployment existed before the demo: its first replicas are already loaded.
            await self.deployment.start(settings.start_replicas)
            url = await stack.enter_async_context(self.adapter())
            session = await stack.enter_async_context(aiohttp.ClientSession())
            # The adapter runs on the loop's clock, `scale` times slower than the emulated one: a rate it
            # serves is per loop second; the HPA reads it per emulated second, the cluster's.
            client = ExternalMetricsClient(
                session, url, settings.namespace, rates={FORECAST_METRIC: settings.scale}
            )
            hpa = HPALoop(self.controller, client, self.deployment, self.timeline)
            observer = Observer(
                self.timeline,
                self.deployment,
                self.requests,
                profile=settings.profile,
                capacity=self.capacity,
                metric=lambda: hpa.reading,
                per_replica=lambda: hpa.per_replica,
                show=view.update,
                queue=self.upstream,
                target=self.target,
            )
            self.stream.write(banner(settings, self.controller.spec, self.capacity, url) + "\n")
            self.timeline.begin()
            # One task for both: at a time both are due, the tick records the sync of that time.
            background = [
                asyncio.create_task(
                    self.timeline.rounds((settings.sync_period, hpa.sync), (settings.tick, observer.observe))
                )
            ]
            try:
                await self.traffic.play()
                await self.traffic.drain()
            finally:
                for task in background:
                    task.cancel()
                await asyncio.gather(*background, return_exceptions=True)
            await observer.observe()
        return observer.ticks

    @contextlib.asynccontextmanager
    async def adapter(self) -> AsyncIterator[str]:
        """The adapter, on the scrape source; with user metrics (the queue's, the demand cap) also on the
        pages they read, through the PromQL stand-in (`lab.demo.cluster.pages`). Yields its URL."""
        s = self.settings
        clock = loop_clock()
        metrics: dict[str, dict[str, object]] = {}
        async with contextlib.AsyncExitStack() as pages:
            targets: list[str] = []
            fleet_pages = False
            if self.upstream is not None:
                targets.append(await pages.enter_async_context(serve_exporter(self.upstream.queues)))
                metrics.update(QUEUE_METRICS)
            if s.metric_name == FORECAST_METRIC:
                # The adapter runs on the loop's clock, `scale` times slower than the emulated one.
                window = FORECAST_WINDOW_SECONDS / s.scale
                metrics[FORECAST_METRIC] = {
                    "horizon": f"{(s.sync_period + s.load_delay) / s.scale:g}s",
                    "window": f"{window:g}s",
                }
            if self.demand is not None:
                targets.append(await pages.enter_async_context(serve_page(self.gateway.page)))
                metrics[DEMAND_METRIC] = self.demand.metric(self.target, self.gateway.cluster, s.scale)
                fleet_pages = True
            if not metrics:
                async with serve_adapter(self.fleet, s.namespace, s.scrape_seconds, clock=clock) as url:
                    yield url
                return

            def urls() -> list[str]:
                ready = [r.metrics_url for r in self.fleet.ready_replicas] if fleet_pages else []
                return [*targets, *ready]

            config = stand_in_config(s.namespace, s.scrape_seconds, metrics)
            async with serve_adapter(
                self.fleet,
                s.namespace,
                s.scrape_seconds,
                config=config,
                route=lambda scrape: RoutedSource(scrape, PageSource(urls, wall=clock.wall)),
                clock=clock,
            ) as url:
                yield url

    def write(self, ticks: list[Tick], *, baseline_hours: float | None = None) -> Summary:
        """The report of a played run, in `settings.out`."""
        s = self.settings
        facts = None
        if self.upstream is not None:
            facts = self.upstream.facts(
                self.timeline.start,
                baseline_replica_hours=baseline_hours,
                baseline_min_replicas=None if baseline_hours is None else BASELINE_MIN_REPLICAS,
            )
        return write_report(
            s.out,
            ticks,
            self.requests.records,
            slo=s.slo,
            title=f"{first_target(self.controller.spec)}, profile {s.profile.name}",
            target=self.target if s.target_type == "AverageValue" else None,
            settings=describe(s, self.controller.spec, self.capacity, self.target),
            upstream=facts,
            policy=hpa_text(s, self.controller.spec),
            comparison=None if self.day is None else comparison(self.day),
        )


async def run_demo(settings: DemoSettings, stream: TextIO) -> Summary:
    """Run one demo on the running loop and return its summary (the report is in `settings.out`)."""
    started = time.monotonic()
    capacity = settings.capacity or measure_capacity(settings.params, seed=settings.seed)
    # The same day backtested (seconds of CPU, no clock); its recommendation is the default HPA.
    day = None if settings.upstream is not None else backtest_day(settings, capacity)
    if day is not None and day.recommended is not None and settings.metric is None:
        settings = apply(settings, day.recommended)
    summary = await Demo(settings, stream, capacity=capacity, day=day).run()
    log.info("demo finished in %.1fs", time.monotonic() - started)
    return summary


def play_demo(settings: DemoSettings, stream: TextIO) -> Summary:
    """Run one demo on its own event loop: on virtual time (`lab.virtual_time`), so that a seed gives
    one run whatever the machine's load, unless `settings.real_time` paces it on the wall clock."""
    return virtual_time.run(run_demo(settings, stream), virtual=not settings.real_time)
