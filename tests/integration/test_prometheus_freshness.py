"""Freshness through a real Prometheus: what is served is as old as the oldest raw sample behind it.

A real Prometheus (Debian package) scrapes exposition servers with `honor_timestamps: true`; some pods
stamp their samples in the past, as exporters, federation, remote-write and Thanos/Mimir ingestion lag
do in production. Each namespace is one situation:

| namespace | pods                                        | every catalogue metric must answer       |
|-----------|---------------------------------------------|------------------------------------------|
| fresh     | two pods, current samples                    | the analytic value                       |
| aged      | samples stamped 40 s old                     | a value whose age is 40 s (not ≈ 0)      |
| old       | samples stamped 137 s old (max_age 90 s)     | `StaleSample`, every metric              |
| gap       | one pod lacks `vllm:num_requests_waiting`    | `GaugeGap` naming the family and the pod |
| inf       | one of two pods reports waiting `+Inf`       | 503, never 0                             |
| nan       | a pod reports KV usage `NaN`                 | `GaugeGap` naming the pod                |

Future and NaN sample times, which a real Prometheus never answers, are in
test_prometheus_untrustworthy_answers.py.
"""

from __future__ import annotations

import asyncio
import functools
import math
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from adapter.app import started_provider
from adapter.config import load
from adapter.errors import GaugeGap, StaleSample
from adapter.provider import CachedProvider
from adapter.sources.prometheus import PrometheusSource
from adapter.vocabulary import catalogue
from adapter.vocabulary.selectors import parse
from tests.integration import procs
from tests.vllm_pages import PodLoad, page

STALE_SECONDS = 137.0
AGED_SECONDS = 40.0
# An age is measured against a sample from the last scrape before the (aligned) evaluation time:
# refresh interval (1 s) + scrape interval (1 s) + slack for a loaded machine.
AGE_SLACK = 6.0
WAITING = "vllm:num_requests_waiting"
# The built-in catalogue, and a user metric whose raw selectors the PromQL parser finds.
ALL = [*(m.name for m in catalogue.BUILTIN), "user_inflight"]


def _stamped(text: str, seconds_old: float) -> str:
    """The exposition with every sample dated `seconds_old` ago (the text format's optional timestamp)."""
    millis = int((time.time() - seconds_old) * 1000)
    return "".join(
        line if line.startswith("#") or not line.strip() else f"{line.rstrip()} {millis}\n"
        for line in text.splitlines(keepends=True)
    )


def _without(text: str, family: str) -> str:
    """The exposition without one family (its HELP, TYPE and samples)."""
    return "".join(
        line
        for line in text.splitlines(keepends=True)
        if not re.match(rf"(# \w+ )?{re.escape(family)}\b", line)
    )


def _pod(load: PodLoad, seconds_old: float = 0.0, drop: str | None = None) -> Callable[[], str]:
    def render() -> str:
        text = page(load)
        if drop:
            text = _without(text, drop)
        return _stamped(text, seconds_old) if seconds_old else text

    return render


FRESH_A = PodLoad("llama", running=10, waiting=4, kv_usage=0.5, requests_per_second=20, tpot_mean=0.02)
# One TPOT for both pods: a request-weighted mean over pods scraped for only a few seconds depends on
# each pod's rate extrapolation (test_prometheus_source.py checks the weighting after longer).
FRESH_B = PodLoad("llama", running=6, waiting=1, kv_usage=0.3, requests_per_second=10, tpot_mean=0.02)
LOADED = PodLoad("llama", running=7, waiting=3, kv_usage=0.5, requests_per_second=10)
PODS: dict[str, tuple[str, Callable[[], str]]] = {
    "fresh-a": ("fresh", _pod(FRESH_A)),
    "fresh-b": ("fresh", _pod(FRESH_B)),
    "aged-a": ("aged", _pod(LOADED, AGED_SECONDS)),
    "old-a": ("old", _pod(LOADED, STALE_SECONDS)),
    "old-b": (
        "old",
        _pod(PodLoad("llama", running=2, kv_usage=0.1, requests_per_second=5, old=True), STALE_SECONDS),
    ),
    "gap-complete": ("gap", _pod(LOADED)),
    "gap-broken": ("gap", _pod(LOADED, drop=WAITING)),
    "inf-a": (
        "inf",
        _pod(PodLoad("llama", running=1, waiting=math.inf, kv_usage=0.2, requests_per_second=5)),
    ),
    "inf-b": ("inf", _pod(PodLoad("llama", running=1, waiting=40, kv_usage=0.2, requests_per_second=5))),
    "nan-a": ("nan", _pod(PodLoad("llama", running=1, kv_usage=math.nan, requests_per_second=5))),
}
FRESH_VALUES = {
    "vllm_requests_waiting": 5.0,
    "vllm_requests_running": 16.0,
    "vllm_requests_inflight": 21.0,
    "vllm_kv_cache_usage": 0.4,
    "vllm_tpot_seconds": 0.02,
    "vllm_ttft_seconds": 1.0,
    "user_inflight": 21.0,
}
CONFIG = (
    "prometheus: {{url: '{url}', refresh_interval: 1s, timeout: 2s, max_age: 90s}}\n"
    "metrics:\n"
    "  vllm_ttft_seconds: {{window: 1m}}\n"
    "  vllm_tpot_seconds: {{window: 1m}}\n"
    "  user_inflight:\n"
    "    query: 'sum(vllm:num_requests_running{{<<.LabelMatchers>>}})"
    " + sum(vllm:num_requests_waiting{{<<.LabelMatchers>>}} offset 1s)'\n"
    "    presence: 'vllm:num_requests_running{{<<.LabelMatchers>>}}'\n"
)


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[procs.Process]:
    """A real Prometheus honouring the pods' own timestamps, after three scrapes of every pod."""
    server = procs.ExpositionServer()
    scrape_configs = []
    for pod, (namespace, render) in PODS.items():
        port = server.add(pod, render)
        scrape_configs.append(
            {
                "job_name": pod,
                "honor_timestamps": True,
                "static_configs": [
                    {"targets": [f"127.0.0.1:{port}"], "labels": {"namespace": namespace, "pod": pod}}
                ],
            }
        )
    try:
        with procs.prometheus(tmp_path_factory.mktemp("prometheus"), scrape_configs) as process:
            procs.wait_for(
                lambda: len(procs.prometheus_query(process.url, "count_over_time(up[1m]) >= 3")) == len(PODS),
                60,
                what="three scrapes of every pod",
            )
            yield process
    finally:
        server.close()


@pytest.fixture
async def provider(prom: procs.Process) -> AsyncIterator[CachedProvider]:
    """The provider the server assembles (`app.started_provider`) over a Prometheus source."""
    async with started_provider(load(CONFIG.format(url=prom.url))) as made:
        yield made


@pytest.mark.parametrize("metric", ALL)
async def test_fresh_samples_are_values(provider: CachedProvider, metric: str) -> None:
    """Current samples: every catalogue metric is its analytic value, a few seconds old."""
    value = await provider.get(metric, "fresh", parse("model_name=llama"))
    assert value.value == pytest.approx(FRESH_VALUES[metric], abs=0.0015)
    assert 0 <= value.age < AGE_SLACK


@pytest.mark.parametrize("metric", ALL)
async def test_old_samples_are_stale_for_every_metric(provider: CachedProvider, metric: str) -> None:
    """Samples 137 s old are stale (max_age 90 s) whatever the query shape: sums of families, alias
    fallbacks and rates all date their value by their raw samples, never by the evaluation time."""
    with pytest.raises(StaleSample) as stale:
        await provider.get(metric, "old", parse(""))
    age = float(re.search(r"is ([0-9.]+)s old", str(stale.value)).group(1))  # type: ignore[union-attr]
    assert STALE_SECONDS <= age < STALE_SECONDS + AGE_SLACK, str(stale.value)


@pytest.mark.parametrize("metric", ALL)
async def test_aged_samples_report_their_true_age(provider: CachedProvider, metric: str) -> None:
    """Samples 40 s old are served (max_age 90 s), and the age says 40 s for every metric."""
    value = await provider.get(metric, "aged", parse(""))
    assert AGED_SECONDS <= value.age < AGED_SECONDS + AGE_SLACK


async def test_absent_gauge_family_on_a_present_pod_is_a_gap(provider: CachedProvider) -> None:
    """A pod without `num_requests_waiting` makes inflight 503 naming the family and the pod, not a sum
    that silently leaves that pod's queue out (nor 0)."""
    with pytest.raises(GaugeGap) as gap:
        await provider.get("vllm_requests_inflight", "gap", parse(""))
    assert f"{WAITING} absent on gap/gap-broken" in str(gap.value)
    assert (await provider.get("vllm_requests_running", "gap", parse(""))).value == 14.0


@pytest.mark.parametrize("metric", ["vllm_requests_waiting", "vllm_requests_inflight"])
async def test_an_infinite_gauge_on_one_pod_is_never_zero(provider: CachedProvider, metric: str) -> None:
    """One pod reporting `+Inf` waiting beside one reporting 40: 503 naming that pod, never 0."""
    with pytest.raises(GaugeGap) as gap:
        await provider.get(metric, "inf", parse(""))
    assert f"{WAITING} is INF on inf/inf-a" in str(gap.value)


async def test_a_nan_gauge_is_a_gap(provider: CachedProvider) -> None:
    """A NaN KV usage is 503 naming the pod, not an average of the others and not 0."""
    with pytest.raises(GaugeGap) as gap:
        await provider.get("vllm_kv_cache_usage", "nan", parse(""))
    assert "vllm:kv_cache_usage_perc is NAN on nan/nan-a" in str(gap.value)


async def test_replicas_evaluated_in_one_interval_agree(prom: procs.Process) -> None:
    """Two sources (two replicas) whose clocks read different instants of one refresh interval send the
    same evaluation time, so they return the same sample although Prometheus scraped in between; and
    the sample time never goes backwards as the interval advances."""
    settings = load(CONFIG.format(url=prom.url).replace("refresh_interval: 1s", "refresh_interval: 2s"))
    interval = settings.prometheus.refresh_interval
    procs.wait_for(
        lambda: procs.prometheus_query(prom.url, 'count_over_time(up{namespace="fresh"}[10s]) >= 8'),
        30,
        what="ten seconds of scrapes",
    )
    # An interval entirely in the past, 2 s long with 1 s scrapes: its two ends see different scrapes.
    start = (math.floor(time.time() / interval) - 2) * interval
    clocks = {"early": start + 0.05, "late": start + interval - 0.05}
    sources = {
        # read at each call: the loop below moves the clocks
        name: PrometheusSource(settings.prometheus, wall=functools.partial(clocks.__getitem__, name))
        for name in clocks
    }
    metric = catalogue.builtin("vllm_requests_inflight")
    try:
        early, late = await asyncio.gather(*(s.fetch(metric, "fresh", parse("")) for s in sources.values()))
        assert early == late
        assert start - 2 < early.timestamp <= start
        stamps = []
        for step in range(4):
            clocks["early"] = start + step * interval / 2 + 0.05
            stamps.append((await sources["early"].fetch(metric, "fresh", parse(""))).timestamp)
        assert stamps == sorted(stamps) and stamps[0] < stamps[-1]
    finally:
        for source in sources.values():
            await source.close()


def _query(prom_url: str, config: Path, metric: str, namespace: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "adapter",
            "query",
            metric,
            "-n",
            namespace,
            "--config",
            str(config),
            "--prometheus-url",
            prom_url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_query_command_prints_the_true_age_of_every_metric(prom: procs.Process, tmp_path: Path) -> None:
    """`vllm-autoscale query` prints 40 s for 40-s-old samples,
    and a stale error naming 137 s, for every metric."""
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(url=prom.url))
    for metric in ALL:
        aged = _query(prom.url, config, metric, "aged")
        assert aged.returncode == 0, aged.stderr
        age = float(re.search(r"# sample age ([0-9.]+)s", aged.stdout).group(1))  # type: ignore[union-attr]
        assert AGED_SECONDS <= age < AGED_SECONDS + AGE_SLACK, (metric, aged.stdout)
        old = _query(prom.url, config, metric, "old")
        assert old.returncode == 1 and '"code": 503' in old.stdout, (metric, old.stdout, old.stderr)
        seconds = float(re.search(r"is ([0-9.]+)s old", old.stderr).group(1))  # type: ignore[union-attr]
        assert STALE_SECONDS <= seconds < STALE_SECONDS + AGE_SLACK, (metric, old.stderr)
