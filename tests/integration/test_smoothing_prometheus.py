"""Smoothed gauges through a real Prometheus: the served value is each series' `avg_over_time`, aggregated.

The fleet is written through Prometheus' remote-write receiver (tests/integration/remote_write.py) at
sample times and values the test chooses, so the expected means are computed here in Python from
the very samples written, and checked against Prometheus' own `avg_over_time` too. The adapter is
the production stack without HTTP (`PrometheusSource` + `make_provider`) on a wall clock frozen at
`NOW`, so every query is evaluated at `NOW` and every age is exact.

The namespaces, their pods and what is served:

- smooth: three pods (new names, old names, the waiting breakdown), samples 1-2 s apart, the newest
  0.5-3.25 s old; served: the mean of each series over the window, aggregated, dated 3.25 s old.
- stale: samples up to 25.5 s old (`max_age` 20 s); served: `StaleSample`, though the window has some.
- sparse: `running` 15.5 s old, inside `max_age` but not the 10 s window; served: `GaugeGap` naming the
  pod, never a sum without it.
- gone: one live pod, one that vanished (a staleness marker); served: the live pod's mean alone.
"""

from __future__ import annotations

import asyncio
import json
import math
import struct
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapter.app import make_provider
from adapter.clock import Clock
from adapter.config import load
from adapter.errors import AdapterError, GaugeGap, StaleSample
from adapter.provider import CachedProvider
from adapter.sources.prometheus import PrometheusSource
from adapter.telemetry import Telemetry
from adapter.vocabulary.selectors import parse
from tests.integration import procs
from tests.integration.remote_write import Series, push

pytestmark = pytest.mark.integration

#: the evaluation instant: whole seconds, so a 1 s refresh interval does not move it
NOW = float(math.floor(time.time()))
WINDOW = 30.0
RUNNING_WINDOW = 10.0
CONFIG = (
    "prometheus: {{url: '{url}', refresh_interval: 1s, timeout: 5s, max_age: 20s}}\n"
    "metrics:\n"
    "  vllm_requests_inflight: {{smoothing: 30s}}\n"
    "  vllm_requests_waiting: {{smoothing: 30s}}\n"
    "  vllm_requests_running: {{smoothing: 10s, max_age: 60s}}\n"
    "  vllm_kv_cache_usage: {{smoothing: 30s}}\n"
    "  vllm_saturation: {{capacity: 10, kv_target: 0.9, queue_target: 4, smoothing: 30s}}\n"
)
#: Prometheus' staleness marker (value.StaleNaN): a NaN with this bit pattern
STALE_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]

RUNNING, WAITING, KV = "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"
OLD_KV, BY_REASON = "vllm:gpu_cache_usage_perc", "vllm:num_requests_waiting_by_reason"


def _times(newest_age: float, spacing: float, count: int) -> list[float]:
    """`count` sample times `spacing` apart, oldest first, the newest `newest_age` before NOW. None
    lands on a window's edge, where Prometheus 2 and 3 differ."""
    return [NOW - newest_age - spacing * k for k in reversed(range(count))]


def _values(times: list[float], seed: int, scale: float = 1.0) -> list[tuple[float, float]]:
    """A different value at every sample (a gauge that moves), deterministic per seed."""
    return [(t, ((i * 7 + seed) % 11) * scale) for i, t in enumerate(times)]


class Fleet:
    """The series written, and what the test computes from them."""

    def __init__(self) -> None:
        self.series: list[Series] = []

    def add(
        self, namespace: str, pod: str, name: str, samples: list[tuple[float, float]], **labels: str
    ) -> None:
        base = {
            "namespace": namespace,
            "pod": pod,
            "instance": f"{pod}:8000",
            "job": "vllm",
            "model_name": "llama",
        }
        self.series.append(Series({**base, **labels, "__name__": name}, samples))

    def mean(
        self,
        namespace: str,
        pod: str,
        name: str,
        *,
        window: float = WINDOW,
        labels: dict[str, str] | None = None,
    ) -> float:
        """The mean of one series' samples inside (NOW - window, NOW]: avg_over_time, computed here."""
        (series,) = [
            s
            for s in self.series
            if s.labels["namespace"] == namespace
            and s.labels["pod"] == pod
            and s.labels["__name__"] == name
            and all(s.labels.get(k) == v for k, v in (labels or {}).items())
        ]
        assert all(t != NOW - window for t, _ in series.samples), "Prometheus 2 and 3 differ on the edge"
        inside = [v for t, v in series.samples if NOW - window < t <= NOW and not math.isnan(v)]
        assert inside, f"{pod} {name} has no sample in the window"
        return sum(inside) / len(inside)


def _smooth(fleet: Fleet) -> None:
    a = _times(0.5, 1.0, 40)
    fleet.add("smooth", "new-a", RUNNING, _values(a, 1))
    fleet.add("smooth", "new-a", WAITING, _values(a, 2, 0.5))
    fleet.add("smooth", "new-a", KV, _values(a, 3, 0.08))
    b = _times(3.25, 2.0, 20)  # older names, sparser scrapes, the oldest newest sample
    fleet.add("smooth", "old-b", RUNNING, _values(b, 4))
    fleet.add("smooth", "old-b", WAITING, _values(b, 5, 0.5))
    fleet.add("smooth", "old-b", OLD_KV, _values(b, 6, 0.08))
    c = _times(1.25, 1.5, 25)  # the waiting breakdown: only its capacity part is "waiting"
    fleet.add("smooth", "split-c", RUNNING, _values(c, 7))
    fleet.add("smooth", "split-c", BY_REASON, _values(c, 8, 0.5), reason="capacity")
    fleet.add("smooth", "split-c", BY_REASON, _values(c, 9, 3.0), reason="deferred")
    fleet.add("smooth", "split-c", WAITING, [(t, v + 100) for t, v in _values(c, 8, 0.5)])
    fleet.add("smooth", "split-c", KV, _values(c, 10, 0.08))


def _edges(fleet: Fleet) -> None:
    old = _times(25.5, 1.0, 40)
    for name, seed in ((RUNNING, 1), (WAITING, 2), (KV, 3)):
        fleet.add("stale", "late", name, _values(old, seed, 0.08))
    fleet.add("sparse", "slow", RUNNING, _values(_times(15.5, 20.0, 3), 1))
    for name, seed in ((WAITING, 2), (KV, 3)):
        fleet.add("sparse", "slow", name, _values(_times(0.5, 1.0, 20), seed, 0.08))
    live = _times(0.5, 1.0, 40)
    gone = _times(6.5, 1.0, 30)
    for name, seed in ((RUNNING, 1), (WAITING, 2), (KV, 3)):
        fleet.add("gone", "live", name, _values(live, seed, 0.08))
        fleet.add("gone", "vanished", name, [(t, 50.0) for t in gone] + [(NOW - 5.5, STALE_NAN)])


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[procs.Process, Fleet]]:
    """A real Prometheus holding the fleet, written through remote write."""
    workdir: Path = tmp_path_factory.mktemp("prometheus")
    fleet = Fleet()
    _smooth(fleet)
    _edges(fleet)
    with procs.prometheus(workdir, [], extra_args=("--web.enable-remote-write-receiver",)) as prom:
        push(prom.url, fleet.series)
        yield prom, fleet


def _query_at(url: str, promql: str) -> float:
    """Prometheus' own answer to `promql` at NOW (a single series)."""
    data = urllib.parse.urlencode({"query": promql, "time": repr(NOW)}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=data, timeout=5) as response:
        document: dict[str, Any] = json.loads(response.read())
    (item,) = document["data"]["result"]
    return float(item["value"][1])


def _served(url: str, metric: str, namespace: str) -> tuple[float, float] | AdapterError:
    """What the adapter serves for the key at NOW: (value, sample time), or the error."""

    async def ask() -> tuple[float, float] | AdapterError:
        config = load(CONFIG.format(url=url))
        source = PrometheusSource(config.prometheus, wall=lambda: NOW)
        provider: CachedProvider = make_provider(config, source, Telemetry(), clock=Clock(wall=lambda: NOW))
        await source.start()
        try:
            value = await provider.get(metric, namespace, parse("model_name=llama"))
            return value.value, value.timestamp
        except AdapterError as exc:
            return exc
        finally:
            await provider.cache.close()
            await source.close()

    return asyncio.run(ask())


def _expected(fleet: Fleet) -> dict[str, float]:
    """Every smoothed metric of namespace `smooth`, from the samples written."""
    pods = {  # pod: (running name, waiting name and labels, KV name)
        "new-a": (WAITING, {}, KV),
        "old-b": (WAITING, {}, OLD_KV),
        "split-c": (BY_REASON, {"reason": "capacity"}, KV),
    }

    def running(pod: str, window: float = WINDOW) -> float:
        return fleet.mean("smooth", pod, RUNNING, window=window)

    def waiting(pod: str) -> float:
        name, labels, _ = pods[pod]
        return fleet.mean("smooth", pod, name, labels=labels)

    def kv(pod: str) -> float:
        return fleet.mean("smooth", pod, pods[pod][2])

    per_pod_saturation = [max((running(p) + waiting(p)) / 10, kv(p) / 0.9, waiting(p) / 4) for p in pods]
    return {
        "vllm_requests_inflight": sum(running(p) + waiting(p) for p in pods),
        "vllm_requests_waiting": sum(waiting(p) for p in pods),
        "vllm_requests_running": sum(running(p, RUNNING_WINDOW) for p in pods),
        "vllm_kv_cache_usage": sum(kv(p) for p in pods) / len(pods),
        "vllm_saturation": sum(per_pod_saturation) / len(pods),
    }


@pytest.mark.parametrize(
    "metric",
    [
        "vllm_requests_inflight",
        "vllm_requests_waiting",
        "vllm_requests_running",
        "vllm_kv_cache_usage",
        "vllm_saturation",
    ],
)
def test_the_served_value_is_the_mean_of_each_series_over_the_window(
    written: tuple[procs.Process, Fleet], metric: str
) -> None:
    prom, fleet = written
    expected = _expected(fleet)[metric]
    served = _served(prom.url, metric, "smooth")
    assert isinstance(served, tuple), served
    value, timestamp = served
    assert value == pytest.approx(expected, rel=1e-9)
    # dated by the oldest of the series' newest samples (old-b's, 3.25 s old), not by the window
    assert timestamp == pytest.approx(NOW - 3.25, abs=0.001)


def test_prometheus_own_avg_over_time_agrees(written: tuple[procs.Process, Fleet]) -> None:
    """The Python means are Prometheus' avg_over_time: the test's arithmetic is Prometheus'."""
    prom, fleet = written
    expected = _expected(fleet)
    ns = 'namespace="smooth"'
    running = _query_at(prom.url, f"sum(avg_over_time({RUNNING}{{{ns}}}[10s]))")
    assert running == pytest.approx(expected["vllm_requests_running"], rel=1e-9)
    kv = _query_at(prom.url, f"avg(avg_over_time({KV}{{{ns}}}[30s]) or avg_over_time({OLD_KV}{{{ns}}}[30s]))")
    assert kv == pytest.approx(expected["vllm_kv_cache_usage"], rel=1e-9)
    latest = _query_at(prom.url, f"sum({RUNNING}{{{ns}}})")
    assert latest != pytest.approx(running), (
        "the fleet's gauges move: a mean that equals the latest proves nothing"
    )


@pytest.mark.parametrize("metric", ["vllm_requests_inflight", "vllm_kv_cache_usage", "vllm_saturation"])
def test_a_window_with_samples_is_still_stale_when_its_newest_sample_is_old(
    written: tuple[procs.Process, Fleet], metric: str
) -> None:
    prom, _ = written
    served = _served(prom.url, metric, "stale")
    assert isinstance(served, StaleSample), served
    assert "is 25.5s old (max_age 20s)" in str(served)


def test_a_present_pod_without_a_sample_in_the_window_is_a_gap(written: tuple[procs.Process, Fleet]) -> None:
    """`running` 15.5 s old is fresh enough (max_age 60 s) but outside its 10 s window: 503 naming
    the pod, not a sum that leaves it out."""
    prom, _ = written
    served = _served(prom.url, "vllm_requests_running", "sparse")
    assert isinstance(served, GaugeGap), served
    assert f"{RUNNING} absent on sparse/slow" in str(served)


def test_a_vanished_pod_stops_counting_at_once(written: tuple[procs.Process, Fleet]) -> None:
    """A pod gone 5.5 s ago (staleness marker) still has samples inside the window, which a bare
    avg_over_time would sum; the adapter serves the live pod's mean alone, dated by the live pod."""
    prom, fleet = written
    served = _served(prom.url, "vllm_requests_running", "gone")
    assert isinstance(served, tuple), served
    live = fleet.mean("gone", "live", RUNNING, window=RUNNING_WINDOW)
    assert served[0] == pytest.approx(live, rel=1e-9)
    assert served[1] == pytest.approx(NOW - 0.5, abs=0.001)
    bare = _query_at(prom.url, f'sum(avg_over_time({RUNNING}{{namespace="gone"}}[10s]))')
    assert bare == pytest.approx(live + 50.0, rel=1e-9), "the vanished pod's samples are in the window"
