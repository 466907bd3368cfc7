"""The scrape source's values (adapter/sources/scrape.py) from real HTTP pods on loopback: gauges
summed over pods, rates and quantiles from successive scrapes, the selection of series, and what
it answers when there is nothing to compute from.

The pods (tests/sources/scrape_fleet.py) serve vLLM pages whose counters grow linearly, so every
rate, mean and quantile is known exactly.
"""

from __future__ import annotations

import math
import time

import pytest

from adapter.config import load
from adapter.errors import ConfigError, NoTargets, SourceUnavailable
from adapter.vocabulary import selectors
from adapter.vocabulary.catalogue import MetricDef, PromQLSpec
from tests.sources.scrape_fleet import EVERYTHING, INTERVAL, Fleet, MakeSource, metric, rounds
from tests.vllm_pages import PodLoad


async def test_gauges_over_pods(fleet: Fleet, make_source: MakeSource) -> None:
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


async def test_histograms_from_successive_scrapes(fleet: Fleet, make_source: MakeSource) -> None:
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
    assert tpot.targets == 2
    assert tpot.value == pytest.approx(0.035, rel=0.03)
    assert ttft.value == pytest.approx(1.0, abs=1e-6)


async def test_old_and_new_vllm_names_mix(fleet: Fleet, make_source: MakeSource) -> None:
    """A pod on vLLM ≤ 0.10 names (gpu_cache_usage_perc, time_per_output_token_seconds) counts
    alongside a current one."""
    a = fleet.add("a", PodLoad("llama", kv_usage=0.2, requests_per_second=10, tpot_mean=0.02))
    b = fleet.add("b", PodLoad("llama", kv_usage=0.8, requests_per_second=10, tpot_mean=0.04, old=True))
    source = await make_source([a, b])
    await rounds(source, 3)
    kv = await source.fetch(metric("vllm_kv_cache_usage"), "ml", EVERYTHING)
    tpot = await source.fetch(metric("vllm_tpot_seconds"), "ml", EVERYTHING)
    assert kv.targets == 2
    assert kv.value == pytest.approx(0.5)
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
    fleet: Fleet, make_source: MakeSource, namespace: str | None, selector: str, expected: tuple[float, int]
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


async def test_no_targets(fleet: Fleet, make_source: MakeSource) -> None:
    """Another namespace, or a selector no series matches, has no targets: 503, never 0."""
    source = await make_source([fleet.add("a", PodLoad("llama"))])
    with pytest.raises(
        NoTargets,
        match=(
            "no scrape targets in namespace 'other' for vllm_requests_waiting among the 1 static "
            "targets of namespace 'ml'"
        ),
    ):
        await source.fetch(metric("vllm_requests_waiting"), "other", EVERYTHING)
    with pytest.raises(
        NoTargets,
        match="no series of vllm_requests_waiting match the selector 'model_name=x' on the 1 scraped",
    ):
        await source.fetch(metric("vllm_requests_waiting"), "ml", selectors.parse("model_name=x"))


async def test_a_rate_needs_two_scrapes(fleet: Fleet, make_source: MakeSource) -> None:
    """Right after start a gauge is served, but a rate is a clear "warming up" 503, not on_empty's 0."""
    source = await make_source(
        [fleet.add("a", PodLoad("llama", waiting=3, requests_per_second=5))], interval=30.0
    )
    assert (await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)).value == 3.0
    with pytest.raises(
        SourceUnavailable, match=r"a rate needs two scrapes within its 120s window .* \(warming up\)"
    ):
        await source.fetch(metric("vllm_tpot_seconds"), "ml", EVERYTHING)


async def test_no_traffic_is_empty_not_an_error(fleet: Fleet, make_source: MakeSource) -> None:
    """Δcount = 0: targets exist, the raw quantile is NaN (histogram_quantile without observations),
    and the provider serves on_empty."""
    source = await make_source([fleet.add("a", PodLoad("llama", requests_per_second=0))])
    await rounds(source, 2)
    sample = await source.fetch(metric("vllm_ttft_seconds"), "ml", EVERYTHING)
    assert sample.value is not None and math.isnan(sample.value)
    assert (sample.targets, sample.gaps) == (1, ())


async def test_a_restarted_pod_is_a_counter_reset(fleet: Fleet, make_source: MakeSource) -> None:
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


async def test_user_promql_is_refused(fleet: Fleet, make_source: MakeSource) -> None:
    """User PromQL cannot be evaluated from scrapes: refused in config, and defensively in fetch."""
    with pytest.raises(
        ConfigError, match=r"config key 'metrics\.queue_depth\.query' cannot be served with source 'scrape'"
    ):
        load("source: scrape\nmetrics:\n  queue_depth:\n    query: sum(sqs_messages{<<.LabelMatchers>>})\n")
    source = await make_source([fleet.add("a", PodLoad("llama"))])
    user = MetricDef("queue_depth", "queue", "messages", PromQLSpec("sum(x)"))
    with pytest.raises(SourceUnavailable, match="'queue_depth' is user PromQL"):
        await source.fetch(user, "ml", EVERYTHING)


async def test_describe_names_targets_and_the_equivalent_promql(
    fleet: Fleet, make_source: MakeSource
) -> None:
    """`query` prints how the value is computed: the targets and the PromQL it is equivalent to."""
    source = await make_source([fleet.add("a", PodLoad("llama"))])
    text = source.describe(metric("vllm_requests_inflight"), "ml", selectors.parse("model_name=llama"))
    assert text == (
        "scrape:   1 targets in namespace 'ml' every 0.5s (timeout 0.4s, on_partial error)\n"
        'computes: sum(vllm:num_requests_running{namespace="ml", model_name="llama"}) + '
        'sum(label_replace(vllm:num_requests_waiting_by_reason{reason="capacity", namespace="ml", '
        'model_name="llama"}, "reason", "", "", "") or vllm:num_requests_waiting{namespace="ml", '
        'model_name="llama"})'
    )
