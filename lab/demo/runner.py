"""The whole autoscaling loop in one process: emulated fleet, adapter, load and HPA model.

```
 Traffic ──complete()──► EmulatedFleet (round-robin over Ready replicas, like a Service)
                              │ /metrics of Ready replicas (an EndpointSlice's view)
                              ▼
                 adapter (create_app, scrape source, plain HTTP on a free loopback port)
                              │ GET /apis/external.metrics.k8s.io/v1beta1/namespaces/…/<metric>
                              ▼
               HPALoop (lab.hpa) every sync period ──► Deployment.scale_to (cold start, graceful stop)

 Observer every tick ──► Tick ──► LiveView, then the report (CSV, PNG, summary)
```

One module per part: `timeline` (emulated time), `deployment`, `traffic` (+ `request_log`),
`hpa_loop`, `observe`; this one composes them. Every duration is in emulated seconds on the fleet's
`ScaledClock`; only the scrape interval is chosen in real seconds (it is the adapter's own setting
and costs real CPU).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from typing import TextIO

import aiohttp

from lab.demo.capacity import measure_capacity
from lab.demo.deployment import Deployment
from lab.demo.embedded import serve_adapter
from lab.demo.hpa_loop import HPALoop
from lab.demo.metrics_client import ExternalMetricsClient
from lab.demo.observe import Observer
from lab.demo.report import write_report
from lab.demo.request_log import RequestLog
from lab.demo.settings import DemoSettings
from lab.demo.summary import Summary
from lab.demo.timeline import Timeline
from lab.demo.traffic import Traffic
from lab.demo.view import LiveView
from lab.emulator import EmulatedFleet
from lab.hpa import ControllerSettings, ExternalMetric, HorizontalController, HPASpec

log = logging.getLogger(__name__)


class Demo:
    """One run; `run()` drives it to the end and writes the report."""

    def __init__(self, settings: DemoSettings, stream: TextIO) -> None:
        self.settings = settings
        self.stream = stream
        self.capacity = settings.capacity or measure_capacity(settings.params, seed=settings.seed)
        self.fleet = EmulatedFleet(
            model="demo-model",
            params=settings.params,
            load_delay=settings.load_delay,
            time_scale=settings.scale,
            seed=settings.seed,
        )
        self.timeline = Timeline(self.fleet.clock)
        self.deployment = Deployment(self.fleet)
        self.requests = RequestLog()
        self.traffic = Traffic(
            self.fleet,
            self.timeline,
            self.requests,
            profile=settings.profile,
            capacity=self.capacity,
            vocab_size=settings.params.vocab_size,
            seed=settings.seed,
        )
        metric = ExternalMetric(settings.metric, settings.target_type, f"{settings.target_value:g}")
        self.controller = HorizontalController(
            HPASpec(
                min_replicas=settings.min_replicas, max_replicas=settings.max_replicas, metrics=(metric,)
            ),
            ControllerSettings(settings.sync_period, settings.tolerance, settings.stabilization),
        )

    async def run(self) -> Summary:
        """Start everything, play the profile, stop everything, write the report."""
        settings = self.settings
        view = LiveView(
            self.stream,
            metric=settings.metric,
            target=settings.target_value,
            max_replicas=settings.max_replicas,
            peak_rps=settings.profile.peak * self.capacity,
            interactive=settings.live,
        )
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(self.fleet.stop)
            stack.push_async_callback(self.deployment.stopped)
            stack.push_async_callback(self.traffic.cancel)
            # The Deployment existed before the demo: its first replicas are already loaded.
            await self.deployment.start(max(settings.min_replicas, 1))
            url = await stack.enter_async_context(
                serve_adapter(self.fleet, settings.namespace, settings.scrape_interval)
            )
            session = await stack.enter_async_context(aiohttp.ClientSession())
            client = ExternalMetricsClient(session, url, settings.namespace)
            hpa = HPALoop(self.controller, client, self.deployment, self.timeline)
            observer = Observer(
                self.timeline,
                self.deployment,
                self.requests,
                profile=settings.profile,
                capacity=self.capacity,
                metric=lambda: hpa.reading,
                show=view.update,
            )
            self.stream.write(self.banner(url) + "\n")
            self.timeline.begin()
            background = [
                asyncio.create_task(self.timeline.every(settings.sync_period, hpa.sync)),
                asyncio.create_task(self.timeline.every(settings.tick, observer.observe)),
            ]
            try:
                await self.traffic.play()
                await self.traffic.drain()
            finally:
                for task in background:
                    task.cancel()
                await asyncio.gather(*background, return_exceptions=True)
            await observer.observe()
        return write_report(
            settings.out,
            observer.ticks,
            self.requests.records,
            slo=settings.slo,
            title=f"{settings.metric} {settings.target_type} {settings.target_value:g}, profile {settings.profile.name}",
            target=settings.target_value if settings.target_type == "AverageValue" else None,
            settings=self.describe(),
        )

    def banner(self, url: str) -> str:
        """What the run is about to do, printed before it starts."""
        s = self.settings
        return (
            f"vllm-autoscale demo: profile {s.profile.name!r} ({s.profile.duration:g}s emulated at {s.scale:g}x = "
            f"{s.profile.duration / s.scale:.0f}s), capacity {self.capacity:.2f} req/s per replica\n"
            f"  HPA: {s.metric} {s.target_type} {s.target_value:g}, replicas {s.min_replicas}-{s.max_replicas}, "
            f"sync {s.sync_period:g}s, tolerance {s.tolerance:g}, scale-down window {s.stabilization:g}s, "
            f"cold start {s.load_delay:g}s\n  adapter: {url} (scrape source, insecure loopback)"
        )

    def describe(self) -> dict[str, object]:
        """The run's settings for the summary file."""
        s = self.settings
        return {
            "profile": s.profile.name,
            "metric": s.metric,
            "target_type": s.target_type,
            "target": s.target_value,
            "engine": s.engine,
            "engine_params": dataclasses.asdict(s.params),
            "capacity_rps_per_replica": self.capacity,
            "time_scale": s.scale,
            "sync_period": s.sync_period,
            "tolerance": s.tolerance,
            "downscale_stabilization": s.stabilization,
            "cold_start": s.load_delay,
            "min_replicas": s.min_replicas,
            "max_replicas": s.max_replicas,
            "seed": s.seed,
        }


async def run_demo(settings: DemoSettings, stream: TextIO) -> Summary:
    """Run one demo and return its summary (the report is in `settings.out`)."""
    started = time.monotonic()
    summary = await Demo(settings, stream).run()
    log.info("demo finished in %.1fs", time.monotonic() - started)
    return summary
