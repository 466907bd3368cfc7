"""The whole autoscaling loop in one process: emulated fleet, adapter, load and HPA model.

```
 loadgen ──complete()──► EmulatedFleet (round-robin over Ready replicas, like a Service)
                              │ /metrics of Ready replicas (an EndpointSlice's view)
                              ▼
                 adapter (create_app, scrape source, plain HTTP on a free loopback port)
                              │ GET /apis/external.metrics.k8s.io/v1beta1/namespaces/…/<metric>
                              ▼
               HPA model (lab.hpa) every sync period ──► add/remove replicas (cold start)
```

Every duration is in emulated seconds on the fleet's `ScaledClock`; only the scrape interval is
chosen in real seconds (it is the adapter's own setting and costs real CPU).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final, TextIO

import aiohttp

from lab.demo.capacity import measure_capacity
from lab.demo.embedded import serve_adapter
from lab.demo.metrics_client import ExternalMetricsClient
from lab.demo.report import RequestRecord, Summary, Tick, quantile, write_report
from lab.demo.settings import DemoSettings
from lab.demo.view import LiveView
from lab.emulator import (
    AdmissionRejected,
    EmulatedFleet,
    EmulatedReplica,
    EngineStopped,
    NoReadyReplica,
    ReplicaNotReady,
    Request,
)
from lab.hpa import (
    ControllerSettings,
    ExternalMetric,
    HorizontalController,
    HPASpec,
    MetricError,
    Scale,
    SyncResult,
)
from lab.loadgen import Arrival, arrivals, prompt_token_ids

log = logging.getLogger(__name__)

# A terminating pod keeps serving what it has for up to terminationGracePeriodSeconds (30 by default).
_GRACE_SECONDS: Final = 30.0
# Window of finished requests behind the live TPOT/TTFT p90 (emulated seconds).
_LATENCY_WINDOW: Final = 30.0
# A request refused by a replica that stopped between routing and submission is sent again, as a
# client retries a reset connection; beyond that it counts as failed.
_RETRIES: Final = 2


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
        self.metric = ExternalMetric(settings.metric, settings.target_type, f"{settings.target_value:g}")
        self.spec = HPASpec(
            min_replicas=settings.min_replicas, max_replicas=settings.max_replicas, metrics=(self.metric,)
        )
        self.controller = HorizontalController(
            self.spec,
            ControllerSettings(settings.sync_period, settings.tolerance, settings.stabilization),
        )
        self.start = 0.0
        self.desired = max(settings.min_replicas, 1)
        self.reading: float | None = None
        self.decisions: list[SyncResult] = []
        self.samples: list[Tick] = []
        self.requests: list[RequestRecord] = []
        # (finished at, TTFT, TPOT) of recent requests; either latency may be unknown.
        self._recent: deque[tuple[float, float | None, float | None]] = deque()
        self._sent = 0
        self._completed = 0
        self._inflight: set[asyncio.Task[None]] = set()
        self._stopping: set[asyncio.Task[None]] = set()

    def now(self) -> float:
        """Emulated seconds since the load started."""
        return self.fleet.clock.now() - self.start

    async def sleep_until(self, t: float) -> None:
        """Sleep until emulated time `t` (returns at once if it has passed)."""
        delay = self.fleet.clock.real(t - self.now())
        if delay > 0:
            await asyncio.sleep(delay)

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
            stack.push_async_callback(self._cancel_requests)
            for _ in range(self.desired):
                # The Deployment existed before the demo: its first replicas are already loaded.
                replica = await self.fleet.add_replica(load_delay=0.0)
                await replica.wait_ready()
            url = await stack.enter_async_context(
                serve_adapter(self.fleet, settings.namespace, settings.scrape_interval)
            )
            session = await stack.enter_async_context(aiohttp.ClientSession())
            client = ExternalMetricsClient(session, url, settings.namespace)
            self.stream.write(self.banner(url) + "\n")
            self.start = self.fleet.clock.now()
            background = [
                asyncio.create_task(self._every(settings.sync_period, lambda: self.sync(client))),
                asyncio.create_task(self._every(settings.tick, lambda: self.sample(view))),
            ]
            try:
                await self.play()
                await self.drain()
            finally:
                for task in background:
                    task.cancel()
                await asyncio.gather(*background, return_exceptions=True)
            await self.sample(view)
        return write_report(
            settings.out,
            self.samples,
            self.requests,
            slo=settings.slo,
            title=f"{settings.metric} {settings.target_type} {settings.target_value:g}, profile {settings.profile.name}",
            target=settings.target_value if settings.target_type == "AverageValue" else None,
            settings=self.describe(),
        )

    async def _cancel_requests(self) -> None:
        for task in self._inflight:
            task.cancel()
        await asyncio.gather(*self._inflight, *self._stopping, return_exceptions=True)

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

    async def _every(self, period: float, action: Callable[[], Awaitable[None]]) -> None:
        """Run `action` at t = 0, period, 2 × period, ... (emulated), whatever each run takes."""
        t = 0.0
        while True:
            await self.sleep_until(t)
            try:
                await action()
            except Exception:  # one failed round must not end the demo
                log.exception("demo loop step failed")
            t += period
            while t < self.now():  # fell behind (CPU): skip rounds, as the controller's queue would
                t += period

    # --- load -------------------------------------------------------------------------------------

    async def play(self) -> None:
        """Send the profile's requests at their arrival times."""
        for arrival in arrivals(self.settings.profile, self.capacity, seed=self.settings.seed):
            await self.sleep_until(arrival.at)
            task = asyncio.create_task(self.send(arrival))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)
        await self.sleep_until(self.settings.profile.duration)

    async def drain(self) -> None:
        """Give requests still in flight a grace period to finish."""
        if self._inflight:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.fleet.clock.real(_GRACE_SECONDS)):
                    await asyncio.gather(*self._inflight, return_exceptions=True)

    async def send(self, arrival: Arrival) -> None:
        """One request through the Service: round-robin over Ready replicas."""
        self._sent += 1
        sent = self.now()
        # Only a shared prefix needs real token ids (prefix caching); a private prompt is a length.
        prompt: list[int] | int = (
            prompt_token_ids(arrival, self.settings.params.vocab_size)
            if arrival.shared_prefix_tokens
            else arrival.prompt_tokens
        )
        request: Request | None = None
        try:
            for attempt in range(_RETRIES + 1):
                try:
                    request = await self.fleet.complete(prompt, arrival.max_tokens, ignore_eos=True)
                    break
                except (ReplicaNotReady, EngineStopped):
                    if attempt == _RETRIES:
                        raise
        except (NoReadyReplica, ReplicaNotReady, EngineStopped, AdmissionRejected):
            self.requests.append(RequestRecord(sent, "rejected"))
            return
        except asyncio.CancelledError:
            self.requests.append(RequestRecord(sent, "aborted"))
            raise
        assert request is not None
        if request.finish_reason == "abort":
            self.requests.append(RequestRecord(sent, "aborted"))
            return
        tpot = None
        if request.num_output > 1 and request.first_token is not None and request.last_token is not None:
            tpot = (request.last_token - request.first_token) / (request.num_output - 1)
        self._completed += 1
        self.requests.append(RequestRecord(sent, "ok", request.ttft, tpot))
        self._recent.append((self.now(), request.ttft, tpot))

    # --- the HPA ----------------------------------------------------------------------------------

    async def sync(self, client: ExternalMetricsClient) -> None:
        """One HPA sync: read the scale and the metric, decide, scale the fleet."""
        fleet = self.fleet
        scale = Scale(self.desired, len(fleet.replicas), len(fleet.ready_replicas))
        readings = await client.readings(self.spec.metrics)
        first = readings[0]
        self.reading = None if isinstance(first, MetricError) else first / 1000
        decision = self.controller.sync(self.now(), scale, readings)
        self.decisions.append(decision)
        if decision.error:
            log.info("hpa: %s", decision.error)
        if decision.rescale:
            await self.scale_to(decision.desired_replicas)

    async def scale_to(self, replicas: int) -> None:
        """What the Deployment and its ReplicaSet do with a new `spec.replicas`."""
        self.desired = replicas
        fleet = self.fleet
        while len(fleet.replicas) < replicas:
            await fleet.add_replica()
        excess = len(fleet.replicas) - replicas
        if excess <= 0:
            return
        # The ReplicaSet deletes pods that are not Ready first, then the newest.
        loading = [r for r in fleet.replicas if not r.ready]
        serving = [r for r in fleet.replicas if r.ready]
        victims: list[EmulatedReplica] = (list(reversed(loading)) + list(reversed(serving)))[:excess]
        for victim in victims:
            task = asyncio.create_task(fleet.remove_replica(victim, drain_timeout=_GRACE_SECONDS))
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        await asyncio.sleep(0)  # let the removals take the victims out of the fleet's list

    # --- observation ------------------------------------------------------------------------------

    async def sample(self, view: LiveView) -> None:
        """Record the fleet's state and show it."""
        t = self.now()
        ready = self.fleet.ready_replicas
        engines = [r.engine for r in ready]
        while self._recent and self._recent[0][0] < t - _LATENCY_WINDOW:
            self._recent.popleft()
        previous = self.samples[-1].t if self.samples else 0.0
        elapsed = max(t - previous, 1e-9)
        stage, load = self.settings.profile.at(t)
        sample = Tick(
            t=round(t, 3),
            stage=stage.name,
            offered_rps=load * self.capacity,
            sent_rps=self._sent / elapsed if self.samples else 0.0,
            completed_rps=self._completed / elapsed if self.samples else 0.0,
            # No Ready replica, no engine reporting: unknown (a gap), as the adapter answers 503 then.
            waiting=sum(len(e.waiting) for e in engines) if engines else None,
            running=sum(len(e.running) for e in engines) if engines else None,
            kv_usage=sum(e.kv.usage for e in engines) / len(engines) if engines else None,
            tpot_p90=quantile([tp for _, _, tp in self._recent if tp is not None], 0.9),
            ttft_p90=quantile([ttft for _, ttft, _ in self._recent if ttft is not None], 0.9),
            metric=self.reading,
            desired=self.desired,
            ready=len(ready),
            replicas=len(self.fleet.replicas),
        )
        self._sent = self._completed = 0
        self.samples.append(sample)
        view.update(sample)


async def run_demo(settings: DemoSettings, stream: TextIO) -> Summary:
    """Run one demo and return its summary (the report is in `settings.out`)."""
    started = time.monotonic()
    summary = await Demo(settings, stream).run()
    log.info("demo finished in %.1fs", time.monotonic() - started)
    return summary
