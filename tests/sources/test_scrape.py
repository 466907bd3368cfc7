"""The scrape source (adapter/sources/scrape.py, its loop in scraper.py) against real HTTP pods on loopback.

Each fake pod is a route of a real aiohttp server (bound to port 0 by pytest-aiohttp) serving a
vLLM-format page built with prometheus_client (tests/vllm_pages.py), whose counters grow linearly so
every rate, mean and quantile is known exactly. A pod can be made dead (a closed port), slow,
reset mid-body, or to answer garbage. EndpointSlice discovery is fed recorded-schema slices through
the client's models (no kube-apiserver runs here).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client

from adapter import catalogue, cli, selectors
from adapter.app import create_app
from adapter.catalogue import MetricDef, PromQLSpec
from adapter.config import ScrapeSettings, load, load_file
from adapter.errors import ConfigError, NoTargets, PartialFailure, SourceUnavailable
from adapter.sources.discovery import EndpointSliceDiscovery
from adapter.sources.scrape import ScrapeSource, make_scrape_source
from adapter.telemetry import Telemetry
from tests.integration.procs import free_port
from tests.vllm_pages import PodLoad, page, pod_app

# Generous for loopback pods on a loaded 2-core CI machine: a tighter per-pod timeout made healthy
# pods miss rounds when the whole suite ran at once.
INTERVAL = 0.5
TIMEOUT = 0.4
EVERYTHING = selectors.parse("")


@dataclass
class FakePod:
    """What one pod answers on `/<name>/metrics`."""

    load: PodLoad
    behaviour: str = "ok"
    delay: float = 0.0


class Fleet:
    """Fake vLLM pods behind one loopback server; `url(name)` is a pod's metrics URL."""

    def __init__(self) -> None:
        self.pods: dict[str, FakePod] = {}
        self.base = ""

    def add(self, name: str, load: PodLoad) -> str:
        self.pods[name] = FakePod(load)
        return self.url(name)

    def url(self, name: str) -> str:
        return f"{self.base}/{name}/metrics"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        pod = self.pods[request.match_info["pod"]]
        if pod.delay:
            await asyncio.sleep(pod.delay)
        text = page(pod.load)
        match pod.behaviour:
            case "ok":
                return web.Response(text=text, content_type="text/plain")
            case "http-500":
                return web.Response(status=500, text="engine dead")
            case "html":
                return web.Response(text="<html>login</html>", content_type="text/html")
            case "html-as-text":
                return web.Response(text="<!DOCTYPE html><html>proxy error</html>", content_type="text/plain")
            case "malformed":
                return web.Response(
                    text=text + 'vllm:num_requests_running{engine="1"} lots\n', content_type="text/plain"
                )
            case "not-utf8":
                return web.Response(body=b"vllm:num_requests_running \xff\xfe 1\n", content_type="text/plain")
            case "reset":
                response = web.StreamResponse(
                    headers={"Content-Type": "text/plain", "Content-Length": "100000"}
                )
                await response.prepare(request)
                await response.write(text[:1000].encode())
                assert request.transport is not None
                request.transport.abort()  # the pod vanishes mid-body
                return response
        raise AssertionError(pod.behaviour)


@pytest.fixture
async def fleet(aiohttp_server: Any) -> Fleet:
    fleet = Fleet()
    app = web.Application()
    app.router.add_get("/{pod}/metrics", fleet.handle)
    server = await aiohttp_server(app)
    fleet.base = str(server.make_url("")).rstrip("/")
    return fleet


def dead_url() -> str:
    """A loopback URL whose port was free a moment ago: connections are refused."""
    return f"http://127.0.0.1:{free_port()}/metrics"


Make = Callable[..., Awaitable[ScrapeSource]]


@pytest.fixture
async def make_source() -> AsyncIterator[Make]:
    """Build (from a config, as production does) and start scrape sources; close them all after."""
    sources: list[ScrapeSource] = []

    async def make(
        targets: list[str],
        *,
        on_partial: str = "error",
        interval: float = INTERVAL,
        per_pod: float = TIMEOUT,
        telemetry: Telemetry | None = None,
    ) -> ScrapeSource:
        config = load(
            json.dumps(
                {
                    "source": "scrape",
                    "scrape": {"targets": targets, "namespace": "ml", "interval": interval, "timeout": per_pod,
                               "max_age": max(1.0, interval), "on_partial": on_partial},
                }
            )
        )  # fmt: skip
        source = make_scrape_source(config, telemetry or Telemetry())
        sources.append(source)
        await source.start()
        return source

    yield make
    for source in sources:
        await source.close()


async def rounds(source: ScrapeSource, count: int, within: float = 5.0) -> None:
    """Wait (with a deadline) until `count` more scrape rounds have completed."""
    target = source.rounds + count
    deadline = time.monotonic() + within
    while source.rounds < target:
        assert time.monotonic() < deadline, f"only {source.rounds} of {target} rounds after {within}s"
        await asyncio.sleep(0.02)


def metric(name: str) -> MetricDef:
    return catalogue.builtin(name)


async def test_gauges_over_pods(fleet: Fleet, make_source: Make) -> None:
    """Gauges are summed (or averaged) over every pod; the sample dates from this round's scrapes
    and counts the pods."""
    a = fleet.add("a", PodLoad("llama", running=3, waiting=2, kv_usage=0.5))
    b = fleet.add("b", PodLoad("llama", running=5, waiting=1, kv_usage=0.7))
    source = await make_source([a, b])
    before = time.time()
    inflight = await source.fetch(metric("vllm_requests_inflight"), "ml", EVERYTHING)
    kv = await source.fetch(metric("vllm_kv_cache_usage"), "ml", EVERYTHING)
    assert (inflight.value, inflight.targets) == (11.0, 2)
    assert kv.value == pytest.approx(0.6)
    assert before - INTERVAL <= inflight.timestamp <= time.time()


async def test_histograms_from_successive_scrapes(fleet: Fleet, make_source: Make) -> None:
    """TPOT mean is Δsum/Δcount over pods (10 req/s at 20 ms and 30 req/s at 40 ms → 35 ms);
    the TTFT p90 of the page's spread (tenths at 0.02 … 2.5 s) is the 1 s bucket edge."""
    a = fleet.add("a", PodLoad("llama", requests_per_second=10, tpot_mean=0.02))
    b = fleet.add("b", PodLoad("llama", requests_per_second=30, tpot_mean=0.04))
    source = await make_source([a, b])
    await rounds(source, 3)
    tpot = await source.fetch(metric("vllm_tpot_seconds"), "ml", EVERYTHING)
    ttft = await source.fetch(metric("vllm_ttft_seconds"), "ml", EVERYTHING)
    # Like rate(), each pod's increase is extrapolated by its own scrape timing, so the weights
    # are 10:30 only to within a few per mille; the exact arithmetic is held to promtool elsewhere.
    assert (tpot.value, tpot.targets) == (pytest.approx(0.035, rel=0.03), 2)
    assert ttft.value == pytest.approx(1.0, abs=1e-6)


async def test_old_and_new_vllm_names_mix(fleet: Fleet, make_source: Make) -> None:
    """A pod on vLLM ≤ 0.10 names (gpu_cache_usage_perc, time_per_output_token_seconds) counts
    alongside a current one."""
    a = fleet.add("a", PodLoad("llama", kv_usage=0.2, requests_per_second=10, tpot_mean=0.02))
    b = fleet.add("b", PodLoad("llama", kv_usage=0.8, requests_per_second=10, tpot_mean=0.04, old=True))
    source = await make_source([a, b])
    await rounds(source, 3)
    kv = await source.fetch(metric("vllm_kv_cache_usage"), "ml", EVERYTHING)
    tpot = await source.fetch(metric("vllm_tpot_seconds"), "ml", EVERYTHING)
    assert (kv.value, kv.targets) == (pytest.approx(0.5), 2)
    assert tpot.targets == 2
    assert tpot.value is not None
    assert 0.025 < tpot.value < 0.035  # both pods count: 20 ms alone, 40 ms alone, 30 ms together


@pytest.mark.parametrize(
    ("namespace", "selector", "expected"),
    [
        pytest.param("ml", "model_name=llama", (3.0, 2), id="selector on an exposition label"),
        pytest.param("ml", "model_name in (qwen)", (4.0, 1), id="in selector"),
        pytest.param(None, "model_name!=llama", (4.0, 1), id="not namespaced"),
        pytest.param("ml", "namespace=ml,model_name=qwen", (4.0, 1), id="pod-level namespace label"),
    ],
)
async def test_selection(
    fleet: Fleet, make_source: Make, namespace: str | None, selector: str, expected: tuple[float, int]
) -> None:
    """Series are chosen by the selector as PromQL matchers would choose them."""
    urls = [
        fleet.add("a", PodLoad("llama", waiting=1)),
        fleet.add("b", PodLoad("llama", waiting=2)),
        fleet.add("c", PodLoad("qwen", waiting=4)),
    ]
    source = await make_source(urls)
    sample = await source.fetch(metric("vllm_requests_waiting"), namespace, selectors.parse(selector))
    assert (sample.value, sample.targets) == expected


async def test_no_targets(fleet: Fleet, make_source: Make) -> None:
    """Another namespace, or a selector no series matches, has no targets: 503, never 0."""
    source = await make_source([fleet.add("a", PodLoad("llama"))])
    with pytest.raises(
        NoTargets,
        match="no scrape targets in namespace 'other' for vllm_requests_waiting among the 1 static targets of namespace 'ml'",
    ):
        await source.fetch(metric("vllm_requests_waiting"), "other", EVERYTHING)
    with pytest.raises(
        NoTargets,
        match="no series of vllm_requests_waiting match the selector 'model_name=x' on the 1 scraped",
    ):
        await source.fetch(metric("vllm_requests_waiting"), "ml", selectors.parse("model_name=x"))


async def test_a_rate_needs_two_scrapes(fleet: Fleet, make_source: Make) -> None:
    """Right after start a gauge is served, but a rate is a clear "warming up" 503, not on_empty's 0."""
    source = await make_source(
        [fleet.add("a", PodLoad("llama", waiting=3, requests_per_second=5))], interval=30.0
    )
    assert (await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)).value == 3.0
    with pytest.raises(
        SourceUnavailable, match=r"a rate needs two scrapes within its 120s window .* \(warming up\)"
    ):
        await source.fetch(metric("vllm_tpot_seconds"), "ml", EVERYTHING)


async def test_no_traffic_is_empty_not_an_error(fleet: Fleet, make_source: Make) -> None:
    """Δcount = 0: targets exist, the raw quantile is NaN (histogram_quantile without observations),
    and the provider serves on_empty."""
    source = await make_source([fleet.add("a", PodLoad("llama", requests_per_second=0))])
    await rounds(source, 2)
    sample = await source.fetch(metric("vllm_ttft_seconds"), "ml", EVERYTHING)
    assert sample.value is not None and math.isnan(sample.value)
    assert (sample.targets, sample.gaps) == (1, ())


FAILURES = [
    pytest.param("dead", r"ClientConnectorError: Cannot connect to host 127\.0\.0\.1", id="dead pod"),
    pytest.param("slow", r"timed out after 0\.4s", id="slow pod"),
    pytest.param("reset", r"(ClientPayloadError|ServerDisconnectedError)", id="pod vanishes mid-body"),
    pytest.param("http-500", r"HTTP 500 Internal Server Error", id="http error"),
    pytest.param("html", r"content type 'text/html' must be text/plain or application/openmetrics-text", id="html page"),
    pytest.param("html-as-text", r"unable to parse the exposition: page is not a Prometheus text exposition", id="html served as text"),
    pytest.param("malformed", r"unable to parse the exposition: line \d+: value 'lots' of vllm:num_requests_running must be a number", id="garbage line"),
    pytest.param("not-utf8", r"unable to parse the exposition: not UTF-8", id="binary garbage"),
]  # fmt: skip


def break_pod(fleet: Fleet, behaviour: str) -> str:
    """A pod failing the way `behaviour` says; returns its URL."""
    if behaviour == "dead":
        return dead_url()
    url = fleet.add("bad", PodLoad("llama", waiting=100))
    fleet.pods["bad"].behaviour = "ok" if behaviour == "slow" else behaviour
    fleet.pods["bad"].delay = 5.0 if behaviour == "slow" else 0.0
    return url


@pytest.mark.parametrize(("behaviour", "cause"), FAILURES)
async def test_a_failed_pod_is_a_partial_failure(
    fleet: Fleet, make_source: Make, behaviour: str, cause: str
) -> None:
    """With `on_partial: error` one failing pod makes the metric 503, naming the pod and the
    precise cause; the answer comes within an interval plus the per-pod timeout."""
    good = fleet.add("good", PodLoad("llama", waiting=1))
    bad = break_pod(fleet, behaviour)
    source = await make_source([good, bad])
    started = time.monotonic()
    with pytest.raises(
        PartialFailure,
        match=f"unable to scrape 1 of 2 targets of vllm_requests_waiting in namespace 'ml': {bad}: {cause}",
    ):
        await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)
    assert time.monotonic() - started < INTERVAL + TIMEOUT + 1.0


@pytest.mark.parametrize(("behaviour", "cause"), FAILURES)
async def test_ignore_failed_serves_the_pods_that_answered(
    fleet: Fleet, make_source: Make, behaviour: str, cause: str
) -> None:
    """With `on_partial: ignore-failed` the value is computed over the pods that answered, and a
    slow or broken pod does not hold up the others' rounds."""
    good = fleet.add("good", PodLoad("llama", waiting=1))
    source = await make_source([good, break_pod(fleet, behaviour)], on_partial="ignore-failed")
    started = time.monotonic()
    sample = await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)
    assert (sample.value, sample.targets) == (1.0, 1)
    assert time.monotonic() - started < INTERVAL + TIMEOUT + 1.0
    assert time.time() - sample.timestamp < INTERVAL + TIMEOUT + 0.5


async def test_every_pod_failing_is_unavailable(make_source: Make) -> None:
    """When no pod answered there is nothing to compute from, whatever the policy."""
    source = await make_source([dead_url(), dead_url()], on_partial="ignore-failed")
    with pytest.raises(
        SourceUnavailable, match="unable to scrape any of the 2 targets of vllm_requests_waiting"
    ):
        await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)


async def test_a_failed_pod_of_another_model_does_not_count(fleet: Fleet, make_source: Make) -> None:
    """A pod whose last good scrape had no series matching the selector is irrelevant when it fails."""
    source = await make_source(
        [fleet.add("a", PodLoad("llama", waiting=2)), fleet.add("b", PodLoad("qwen", waiting=5))]
    )
    await rounds(source, 1)
    fleet.pods["b"].behaviour = "http-500"
    await rounds(source, 2)
    sample = await source.fetch(metric("vllm_requests_waiting"), "ml", selectors.parse("model_name=llama"))
    assert sample.value == 2.0
    with pytest.raises(PartialFailure):
        await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)


async def test_a_recovered_pod_counts_again(fleet: Fleet, make_source: Make) -> None:
    """A failure lasts one round: the next good scrape brings the pod back."""
    source = await make_source(
        [fleet.add("a", PodLoad("llama", waiting=2)), fleet.add("b", PodLoad("llama", waiting=5))]
    )
    fleet.pods["b"].behaviour = "http-500"
    with pytest.raises(PartialFailure):
        await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)
    fleet.pods["b"].behaviour = "ok"
    await rounds(source, 2)
    assert (await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)).value == 7.0


async def test_a_restarted_pod_is_a_counter_reset(fleet: Fleet, make_source: Make) -> None:
    """A pod restart drops its counters to zero; the rate treats the drop as a reset (as
    Prometheus does), so the window's mean mixes the 30 ms before and the 60 ms after the restart.
    Without reset handling the huge pre-restart counters would dominate and give just under 30 ms."""
    load = PodLoad("llama", requests_per_second=50, tpot_mean=0.03)
    load.started -= 600  # ten minutes of history: big counters to fall from
    source = await make_source([fleet.add("a", load)])
    await rounds(source, 2)
    load.started, load.tpot_mean = time.time(), 0.06
    await rounds(source, 3)
    sample = await source.fetch(metric("vllm_tpot_seconds"), "ml", EVERYTHING)
    assert sample.value is not None
    assert 0.0301 < sample.value < 0.06


@pytest.fixture
async def pods_on_ports(aiohttp_server: Any) -> Callable[[int], Awaitable[list[tuple[int, PodLoad]]]]:
    """`n` pods, each its own server on its own port (EndpointSlices name one port per slice)."""

    async def make(n: int) -> list[tuple[int, PodLoad]]:
        made = []
        for i in range(n):
            load = PodLoad("llama", waiting=float(i + 1))
            server = await aiohttp_server(pod_app(load))
            made.append((server.port, load))
        return made

    return make


def endpoint_slice(name: str, port: int, ready: bool = True) -> Any:
    """One EndpointSlice (the client's model) with one loopback endpoint."""
    return client.V1EndpointSlice.from_dict(
        {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"vllm-{name}", "namespace": "ml", "labels": {"kubernetes.io/service-name": "vllm"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": ready},
                           "targetRef": {"kind": "Pod", "namespace": "ml", "name": name}}],
            "ports": [{"name": "http", "port": port}],
        }
    )  # fmt: skip


async def test_discovered_pods_come_and_go(pods_on_ports: Any) -> None:
    """Pods listed in EndpointSlices are scraped with their `pod` label; a pod that leaves the
    slices (or turns unready) is dropped with its history; none left is NoTargets."""
    (port0, _), (port1, _) = await pods_on_ports(2)
    slices = [endpoint_slice("vllm-0", port0), endpoint_slice("vllm-1", port1)]
    settings = ScrapeSettings(interval=INTERVAL, timeout=TIMEOUT, discovery_interval=INTERVAL)

    async def lister(namespace: str | None, selector: str) -> list[Any]:
        return list(slices)

    source = ScrapeSource(settings, catalogue.BUILTIN, discovery=EndpointSliceDiscovery(settings, lister))
    try:
        waiting = metric("vllm_requests_waiting")
        assert (await source.fetch(waiting, "ml", EVERYTHING)).value == 3.0
        assert (await source.fetch(waiting, "ml", selectors.parse("pod=vllm-1"))).value == 2.0
        slices[1] = endpoint_slice("vllm-1", port1, ready=False)
        await rounds(source, 3)
        assert (await source.fetch(waiting, "ml", EVERYTHING)).targets == 1
        slices.clear()
        await rounds(source, 3)
        with pytest.raises(
            NoTargets, match=r"no scrape targets in namespace 'ml' .* among EndpointSlices matching"
        ):
            await source.fetch(waiting, "ml", EVERYTHING)
    finally:
        await source.close()


async def test_failed_discovery_without_targets_is_unavailable() -> None:
    """If the API server cannot be listed and no targets are known, the answer is 503 with the
    cause, never "no targets"."""

    async def broken(namespace: str | None, selector: str) -> list[Any]:
        raise SourceUnavailable(
            f"unable to list EndpointSlices in namespace {namespace!r}: Connection refused"
        )

    settings = ScrapeSettings(interval=INTERVAL, timeout=TIMEOUT)
    source = ScrapeSource(settings, catalogue.BUILTIN, discovery=EndpointSliceDiscovery(settings, broken))
    try:
        with pytest.raises(
            SourceUnavailable, match="unable to list EndpointSlices in namespace 'ml': Connection refused"
        ):
            await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)
        with pytest.raises(SourceUnavailable):
            await source.ping()
    finally:
        await source.close()


async def test_user_promql_is_refused(fleet: Fleet, make_source: Make) -> None:
    """User PromQL cannot be evaluated from scrapes: refused in config, and defensively in fetch."""
    with pytest.raises(
        ConfigError, match=r"config key 'metrics\.queue_depth\.query' cannot be served with source 'scrape'"
    ):
        load("source: scrape\nmetrics:\n  queue_depth:\n    query: sum(sqs_messages{<<.LabelMatchers>>})\n")
    source = await make_source([fleet.add("a", PodLoad("llama"))])
    user = MetricDef("queue_depth", "queue", "messages", PromQLSpec("sum(x)"))
    with pytest.raises(SourceUnavailable, match="'queue_depth' is user PromQL"):
        await source.fetch(user, "ml", EVERYTHING)


async def test_a_fetch_late_in_the_interval_waits_for_the_next_round(fleet: Fleet, make_source: Make) -> None:
    """A fetch finding the newest round older than 30% of the interval waits for the next one, so
    the value cache (refreshing once per interval on its own clock) serves fresh samples."""
    source = await make_source([fleet.add("a", PodLoad("llama", waiting=1))], interval=0.5)
    first = await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)
    done = source.rounds
    await asyncio.sleep(0.3)
    second = await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)
    assert source.rounds == done + 1
    assert second.timestamp > first.timestamp


async def test_a_pod_that_keeps_timing_out_does_not_age_the_others(fleet: Fleet, make_source: Make) -> None:
    """Once a slow pod has failed, fetches stop waiting for it: a round settles when the pods that
    answered last time have answered, so the healthy pods' samples are served without the slow
    pod's 0.4 s timeout added to their age."""
    slow = fleet.add("slow", PodLoad("llama", waiting=9))
    fleet.pods["slow"].delay = 5.0
    source = await make_source(
        [fleet.add("a", PodLoad("llama", waiting=1)), slow],
        on_partial="ignore-failed",
        interval=0.5,
        per_pod=0.4,
    )
    await rounds(source, 2)
    ages = []
    for _ in range(3):
        await asyncio.sleep(0.4)  # late in the interval: the fetch waits for the next round to settle
        sample = await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)
        ages.append(time.time() - sample.timestamp)
        assert sample.value == 1.0
    assert max(ages) < 0.3, ages


async def test_scrapes_are_recorded_in_telemetry(fleet: Fleet, make_source: Make) -> None:
    """Every pod scrape is one observation of the adapter's upstream metrics, by outcome."""
    telemetry = Telemetry()
    slow = fleet.add("slow", PodLoad("llama"))
    fleet.pods["slow"].delay = 5.0
    source = await make_source([fleet.add("a", PodLoad("llama")), dead_url(), slow], telemetry=telemetry)
    await rounds(source, 2)
    value = telemetry.registry.get_sample_value
    labels = {"source": "scrape"}
    assert (
        value("vllm_autoscale_upstream_query_duration_seconds_count", {**labels, "outcome": "success"}) or 0
    ) >= 2
    assert (value("vllm_autoscale_upstream_errors_total", {**labels, "outcome": "error"}) or 0) >= 2
    assert (value("vllm_autoscale_upstream_errors_total", {**labels, "outcome": "timeout"}) or 0) >= 2


async def test_describe_names_targets_and_the_equivalent_promql(fleet: Fleet, make_source: Make) -> None:
    """`query` prints how the value is computed: the targets and the PromQL it is equivalent to."""
    source = await make_source([fleet.add("a", PodLoad("llama"))])
    text = source.describe(metric("vllm_requests_inflight"), "ml", selectors.parse("model_name=llama"))
    assert text == (
        "scrape:   1 targets in namespace 'ml' every 0.5s (timeout 0.4s, on_partial error)\n"
        'computes: sum(vllm:num_requests_running{namespace="ml", model_name="llama"}) + '
        'sum(vllm:num_requests_waiting{namespace="ml", model_name="llama"})'
    )


async def test_the_adapter_serves_scraped_values(fleet: Fleet, aiohttp_client: Any) -> None:
    """The real app on the scrape source: ready once a round completed, and the HPA's request
    gets one item with the summed value."""
    a, b = (
        fleet.add("a", PodLoad("llama", running=3, waiting=2)),
        fleet.add("b", PodLoad("llama", running=5, waiting=1)),
    )
    config = load_file(None, {"source": "scrape", "scrape.targets": [a, b], "scrape.namespace": "ml",
                              "scrape.interval": INTERVAL, "scrape.timeout": TIMEOUT})  # fmt: skip
    http = await aiohttp_client(create_app(config))
    deadline = time.monotonic() + 5
    while (await http.get("/readyz")).status != 200:
        assert time.monotonic() < deadline, "the adapter never became ready"
        await asyncio.sleep(0.05)
    response = await http.get("/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/vllm_requests_inflight")
    assert response.status == 200
    assert [item["value"] for item in (await response.json())["items"]] == ["11"]


def test_scrape_flags_override_the_config() -> None:
    """`--scrape-target` (repeatable) and `--scrape-namespace` map to scrape.targets/namespace."""
    for command in (["serve", "--insecure-serving"], ["query", "vllm_requests_waiting"]):
        args = cli.build_parser().parse_args(
            [*command, "--source", "scrape", "--scrape-target", "http://10.0.0.1:8000",
             "--scrape-target", "http://10.0.0.2:8000/metrics", "--scrape-namespace", "ml"]
        )  # fmt: skip
        overrides = cli.serve_overrides(args) if command[0] == "serve" else cli._overrides(args)
        config = load_file(None, overrides)
        assert config.scrape.targets == ("http://10.0.0.1:8000", "http://10.0.0.2:8000/metrics")
        assert config.scrape.namespace == "ml"


async def test_query_command_reads_pods(fleet: Fleet) -> None:
    """`vllm-autoscale query` on the scrape source prints the HPA's answer from the pods."""
    url = fleet.add("a", PodLoad("llama", waiting=4))
    config = load_file(None, {"source": "scrape", "scrape.targets": [url], "scrape.namespace": "ml"})
    report = await cli.query_once(config, "vllm_requests_waiting", "ml", "")
    assert report["response"]["items"][0]["value"] == "4"
    assert report["query"].startswith("scrape:   1 targets in namespace 'ml'")
