"""vLLM-format `/metrics` pages whose values the tests choose, built on prometheus_client.

Counters and histograms grow linearly with time at a chosen rate and a fixed observation
distribution, so any `rate()` over them, and any mean or quantile derived from those rates, is a
known constant however the scrapes fall. `old=True` uses the names of vLLM ≤ 0.10
(`gpu_cache_usage_perc`, `time_per_output_token_seconds`) to exercise the catalogue's aliases.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from adapter.vocabulary import vllm


@dataclass
class PodLoad:
    """What one emulated vLLM pod reports."""

    model: str
    running: float = 0.0
    waiting: float = 0.0
    kv_usage: float = 0.0
    requests_per_second: float = 0.0
    tpot_mean: float = 0.02
    #: TTFT observations fall uniformly in these (lower, upper] bucket intervals, one each per request
    ttft_bucket_values: tuple[float, ...] = (0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5)
    old: bool = False
    engines: int = 1
    started: float = field(default_factory=time.time)


def _histogram(
    name: str, labels: dict[str, str], buckets: tuple[float, ...], values: tuple[float, ...], count: float
) -> HistogramMetricFamily:
    """A histogram where `count` observations are spread evenly over `values`."""
    family = HistogramMetricFamily(name, name, labels=list(labels))
    per_value = count / len(values) if values else 0.0
    cumulative = []
    for bound in buckets:
        cumulative.append((repr(float(bound)), per_value * sum(1 for v in values if v <= bound)))
    cumulative.append(("+Inf", count))
    family.add_metric(list(labels.values()), cumulative, sum_value=per_value * sum(values))
    return family


class _PodCollector(Collector):
    def __init__(self, load: PodLoad) -> None:
        self.load = load

    def collect(self):  # type: ignore[no-untyped-def]
        load = self.load
        elapsed = time.time() - load.started
        for engine in range(load.engines):
            labels = {"engine": str(engine), "model_name": load.model}
            share = 1.0 / load.engines
            for name, value in (
                (vllm.NUM_REQUESTS_RUNNING[0], load.running * share),
                (vllm.NUM_REQUESTS_WAITING[0], load.waiting * share),
                (vllm.KV_CACHE_USAGE[1] if load.old else vllm.KV_CACHE_USAGE[0], load.kv_usage),
            ):
                gauge = GaugeMetricFamily(name, name, labels=list(labels))
                gauge.add_metric(list(labels.values()), value)
                yield gauge
            requests = load.requests_per_second * elapsed * share
            tpot_name = vllm.TPOT[1] if load.old else vllm.TPOT[0]
            yield _histogram(tpot_name, labels, vllm.INTER_TOKEN_LATENCY_BUCKETS, (load.tpot_mean,), requests)
            yield _histogram(vllm.TTFT[0], labels, vllm.TTFT_BUCKETS, load.ttft_bucket_values, requests)


def page(load: PodLoad) -> str:
    """The pod's exposition right now."""
    registry = CollectorRegistry()
    registry.register(_PodCollector(load))
    return generate_latest(registry).decode()


def pod_app(load: PodLoad, path: str = "/metrics") -> web.Application:
    """An aiohttp application that answers `page(load)` at `path`, as a vLLM pod does (serve it with
    pytest-aiohttp's `aiohttp_server`)."""

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=page(load), content_type="text/plain")

    app = web.Application()
    app.router.add_get(path, metrics)
    return app
