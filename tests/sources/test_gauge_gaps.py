"""Gauge gaps reported by the scrape evaluation (adapter/sources/evaluation.py).

vLLM creates its gauges at start-up, so a gauge family absent on a pod that exposes the metric's
other families, or a NaN/Inf gauge, is a broken exporter: the source reports it as a `Gap` naming
the family's preferred name and the pod, and returns the raw value, never a made-up zero. The
provider turns gaps into 503 (tests/test_provider.py); here, and end to end against real HTTP pods
at the bottom, the facts are checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from adapter.app import create_app
from adapter.cache import ValueCache
from adapter.config import load_file
from adapter.errors import GaugeGap
from adapter.provider import CachedProvider
from adapter.sources import Gap
from adapter.sources.evaluation import Snapshot, evaluate
from adapter.sources.page_parser import Labels
from adapter.sources.scrape import make_scrape_source
from adapter.sources.snapshots import History
from adapter.telemetry import Telemetry
from adapter.vocabulary import catalogue, selectors, vllm
from adapter.vocabulary.catalogue import Aggregation, GaugeSpec, MetricDef
from tests.fakes import FakeSource, HandClock
from tests.integration.procs import ExpositionServer

T0 = 1_800_000_000.0
A: Labels = (("engine", "0"), ("model_name", "a"))
B: Labels = (("engine", "0"), ("model_name", "b"))
E1: Labels = (("engine", "1"), ("model_name", "a"))
RUNNING, WAITING = "vllm:num_requests_running", "vllm:num_requests_waiting"
KV_NEW, KV_OLD = vllm.KV_CACHE_USAGE
EVERYTHING = selectors.parse("")
INFLIGHT = catalogue.builtin("vllm_requests_inflight")
WAITING_METRIC = catalogue.builtin("vllm_requests_waiting")
KV = catalogue.builtin("vllm_kv_cache_usage")


def pod(name: str, page: dict[str, dict[Labels, float]], **labels: str) -> Snapshot:
    return Snapshot({"namespace": "ml", "pod": name, **labels}, T0, page, History(0.0))


def test_an_absent_family_on_a_present_pod_is_a_gap() -> None:
    """A pod with 7 running requests and no `vllm:num_requests_waiting` family: inflight is not 7
    and not "empty" (which the provider would turn into on_empty's 0); it has a gap naming the
    family and the pod. The value stays PromQL's: a family without series empties the sum."""
    sample = evaluate(INFLIGHT, [pod("p0", {RUNNING: {A: 7.0}})], EVERYTHING, T0)
    assert sample is not None
    assert (sample.value, sample.targets) == (None, 1)
    assert sample.gaps == (Gap(WAITING, "ml/p0", "absent"),)


def test_a_gap_on_one_pod_does_not_hide_behind_the_others() -> None:
    """PromQL still sums the pods that have the family (the raw value is 3 + 7 + 4); the gap names
    only the pod without it."""
    pods = [
        pod("p0", {RUNNING: {A: 3.0}, WAITING: {A: 4.0}}),
        pod("p1", {RUNNING: {A: 7.0}}),
    ]
    sample = evaluate(INFLIGHT, pods, EVERYTHING, T0)
    assert sample is not None
    assert (sample.value, sample.targets) == (14.0, 2)
    assert sample.gaps == (Gap(WAITING, "ml/p1", "absent"),)


@pytest.mark.parametrize(
    ("bad", "kind"),
    [(math.inf, "inf"), (-math.inf, "inf"), (math.nan, "nan")],
    ids=["+Inf", "-Inf", "NaN"],
)
def test_a_non_finite_gauge_is_a_gap_and_the_value_stays_raw(bad: float, kind: str) -> None:
    """Two pods, one reporting waiting +Inf (or NaN) and the other 40: the value is the raw sum
    (never turned into "no data", which on_empty made 0: a busy fleet read as a scale-down signal),
    and the gaps name the bad pod, for waiting and for inflight alike."""
    pods = [
        pod("bad", {RUNNING: {A: 1.0}, WAITING: {A: bad}}),
        pod("good", {RUNNING: {A: 2.0}, WAITING: {A: 40.0}}),
    ]
    for metric in (WAITING_METRIC, INFLIGHT):
        sample = evaluate(metric, pods, EVERYTHING, T0)
        assert sample is not None
        assert sample.value is not None and not math.isfinite(sample.value)
        assert math.isnan(sample.value) == math.isnan(bad)
        assert sample.gaps == (Gap(WAITING, "ml/bad", kind),)


def test_a_nan_kv_usage_is_a_gap() -> None:
    """KV usage NaN on one engine: the average is NaN, and the pod is named once."""
    sample = evaluate(KV, [pod("p0", {KV_NEW: {A: math.nan, E1: math.nan}})], EVERYTHING, T0)
    assert sample is not None
    assert sample.value is not None and math.isnan(sample.value)
    assert sample.gaps == (Gap(KV_NEW, "ml/p0", "nan"),)


def test_max_skips_nan_but_still_reports_it() -> None:
    """PromQL `max()` skips NaN, so the raw value is the other pod's; the NaN is still a gap."""
    metric = MetricDef("g", "max gauge", "ratio", GaugeSpec((vllm.KV_CACHE_USAGE,), Aggregation.MAX))
    sample = evaluate(
        metric, [pod("p0", {KV_NEW: {A: math.nan}}), pod("p1", {KV_NEW: {A: 0.5}})], EVERYTHING, T0
    )
    assert sample is not None
    assert sample.value == 0.5
    assert sample.gaps == (Gap(KV_NEW, "ml/p0", "nan"),)


@pytest.mark.parametrize(
    ("pods", "selector"),
    [
        pytest.param(
            [pod("p0", {RUNNING: {A: 1.0}, WAITING: {A: 0.0}, KV_OLD: {A: 0.4}})],
            "",
            id="an old vLLM name is the family present",
        ),
        pytest.param(
            [pod("p0", {RUNNING: {A: 1.0}, WAITING: {A: 0.0}, KV_NEW: {A: 0.4}, KV_OLD: {A: math.nan}})],
            "",
            id="a NaN alias shadowed by the newer name does not contribute",
        ),
        pytest.param(
            [
                pod("p0", {RUNNING: {A: 1.0}, WAITING: {A: 2.0}, KV_NEW: {A: 0.1}}),
                pod("p1", {RUNNING: {B: 5.0}}),
            ],
            "model_name=a",
            id="a pod the selector does not match is not a target",
        ),
        pytest.param(
            [pod("p0", {RUNNING: {A: 1.0}, WAITING: {A: 2.0}, KV_NEW: {A: 0.2, B: math.inf}})],
            "model_name=a",
            id="a bad series the selector does not match is irrelevant",
        ),
    ],
)
def test_no_gap(pods: list[Snapshot], selector: str) -> None:
    """Aliases, shadowed series and unselected pods or series are not gaps."""
    for metric in (INFLIGHT, KV):
        sample = evaluate(metric, pods, selectors.parse(selector), T0)
        if sample is not None:
            assert sample.gaps == ()


def test_a_single_family_gauge_absent_on_a_vllm_pod_is_a_gap() -> None:
    """A pod that reports running requests but no waiting family is a target of
    `vllm_requests_waiting` with its gauge absent, not a pod that silently drops out of the sum."""
    waiting = catalogue.builtin("vllm_requests_waiting")
    pods = [
        pod("p0", {RUNNING: {A: 7.0}, KV_NEW: {A: 0.3}}),
        pod("p1", {RUNNING: {A: 1.0}, WAITING: {A: 40.0}, KV_NEW: {A: 0.2}}),
    ]
    sample = evaluate(waiting, pods, EVERYTHING, T0)
    assert sample is not None
    assert sample.gaps == (Gap(WAITING, "ml/p0", "absent"),)


def test_a_family_absent_for_the_selected_series_is_a_gap() -> None:
    """Running has a `model_name=a` series, waiting only a `model_name=b` one: for the selector
    `model_name=a` the pod lacks waiting (PromQL answers nothing for the sum), a gap."""
    page = {RUNNING: {A: 1.0}, WAITING: {B: 2.0}}
    sample = evaluate(INFLIGHT, [pod("p0", page)], selectors.parse("model_name=a"), T0)
    assert sample is not None
    assert sample.gaps == (Gap(WAITING, "ml/p0", "absent"),)


def test_the_gap_names_the_url_when_the_pod_is_unknown() -> None:
    """A static target has no `pod` label: its gap names the scrape URL given to the snapshot."""
    url = "http://10.0.0.5:8000/metrics"
    snapshot = Snapshot({"namespace": "ml"}, T0, {RUNNING: {A: 7.0}}, History(0.0), url)
    sample = evaluate(INFLIGHT, [snapshot], EVERYTHING, T0)
    assert sample is not None
    assert sample.gaps == (Gap(WAITING, url, "absent"),)


def test_the_provider_answers_a_gap_with_503_naming_family_and_pod() -> None:
    """The facts above, judged by the provider: 503 with the cause, never on_empty's 0."""
    clock = HandClock()
    clock.now = T0
    provider = CachedProvider(
        catalogue.BUILTIN,
        FakeSource(),
        ValueCache(1.0, 60.0),
        default_max_age=5.0,
        telemetry=Telemetry(),
        wall=clock,
    )
    pods = [
        pod("bad", {RUNNING: {A: 1.0}, WAITING: {A: math.inf}}),
        pod("good", {RUNNING: {A: 2.0}, WAITING: {A: 40.0}}),
    ]
    sample = evaluate(INFLIGHT, pods, EVERYTHING, T0)
    assert sample is not None
    with pytest.raises(GaugeGap, match=r"vllm_requests_inflight: vllm:num_requests_waiting is INF on ml/bad"):
        provider.resolve(INFLIGHT, sample, EVERYTHING)


# --- end to end: real HTTP pods, the scrape source, the application ---------------------------------

BROKEN_PAGES = {
    # a pod whose exporter lost the waiting family, with 7 running requests
    "no-waiting": 'vllm:num_requests_running{engine="0",model_name="m"} 7.0\n'
    'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5\n',
    # one pod reports waiting +Inf, the other 40
    "inf-waiting": 'vllm:num_requests_running{engine="0",model_name="m"} 1.0\n'
    'vllm:num_requests_waiting{engine="0",model_name="m"} +Inf\n'
    'vllm:kv_cache_usage_perc{engine="0",model_name="m"} NaN\n',
    "healthy": 'vllm:num_requests_running{engine="0",model_name="m"} 2.0\n'
    'vllm:num_requests_waiting{engine="0",model_name="m"} 40.0\n'
    'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25\n',
}


def constant(text: str) -> Callable[[], str]:
    """A page that is always `text`."""
    return lambda: text


@pytest.fixture
def pods() -> Iterator[dict[str, str]]:
    server = ExpositionServer()
    try:
        yield {
            name: f"http://127.0.0.1:{server.add(name, constant(text))}/metrics"
            for name, text in BROKEN_PAGES.items()
        }
    finally:
        server.close()


@pytest.mark.parametrize(
    ("targets", "metric", "gaps"),
    [
        pytest.param(
            ["no-waiting"], "vllm_requests_inflight", [(WAITING, "no-waiting", "absent")], id="absent family"
        ),
        pytest.param(
            ["inf-waiting", "healthy"],
            "vllm_requests_waiting",
            [(WAITING, "inf-waiting", "inf")],
            id="+Inf waiting",
        ),
        pytest.param(
            ["inf-waiting", "healthy"],
            "vllm_requests_inflight",
            [(WAITING, "inf-waiting", "inf")],
            id="+Inf in inflight",
        ),
        pytest.param(
            ["inf-waiting", "healthy"],
            "vllm_kv_cache_usage",
            [(KV_NEW, "inf-waiting", "nan")],
            id="NaN kv usage",
        ),
    ],
)
async def test_scraped_gaps_are_503_never_zero(
    pods: dict[str, str],
    targets: list[str],
    metric: str,
    gaps: list[tuple[str, str, str]],
    aiohttp_client: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The scrape source reports the gap naming the pod's URL (static targets have no pod name),
    and the application answers 503, where it used to answer "0"."""
    urls = [pods[t] for t in targets]
    config = load_file(
        None,
        {
            "source": "scrape",
            "scrape.targets": urls,
            "scrape.namespace": "ml",
            "scrape.interval": 0.5,
            "scrape.timeout": 0.4,
        },
    )
    source = make_scrape_source(config, Telemetry())
    try:
        sample = await source.fetch(catalogue.builtin(metric), "ml", EVERYTHING)
    finally:
        await source.close()
    assert sample.gaps == tuple(Gap(family, pods[pod], kind) for family, pod, kind in gaps)

    http = await aiohttp_client(create_app(config))
    response = await http.get(f"/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/{metric}")
    body = await response.json()
    assert response.status == 503, body
    assert body["message"].endswith("a target does not report a gauge the metric needs")
    family, pod, kind = gaps[0]
    assert f"{family} {'absent' if kind == 'absent' else 'is ' + kind.upper()} on {pods[pod]}" in caplog.text
