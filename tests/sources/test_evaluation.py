"""Catalogue metrics over scraped pods (adapter/sources/evaluation.py).

Expected values are computed by hand (the arithmetic is in the comment or the id), and from the
real vLLM 0.26.0 captures in tests/data/: the idle page and the overloaded page as two scrapes of
one pod, two minutes apart.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from adapter.errors import SourceUnavailable, Unresolved
from adapter.sources.evaluation import Snapshot, evaluate, present
from adapter.sources.page_parser import Labels, Page, Parser, histogram_samples
from adapter.sources.snapshots import History
from adapter.vocabulary import catalogue, selectors, vllm
from adapter.vocabulary.catalogue import (
    Aggregation,
    GaugeSpec,
    HistogramSpec,
    MetricDef,
    Statistic,
    checked_value,
)

DATA = Path(__file__).resolve().parent.parent / "data"
ENGINE0: Labels = (("engine", "0"), ("model_name", "m"))
T0 = 1_800_000_000.0


def capture(name: str) -> Page:
    names = {
        n for fam in (vllm.NUM_REQUESTS_RUNNING, vllm.NUM_REQUESTS_WAITING, vllm.KV_CACHE_USAGE) for n in fam
    }
    names |= {s for fam in (vllm.TTFT, vllm.TPOT) for n in fam for s in histogram_samples(n)}
    return Parser(names).parse((DATA / name).read_text())


def real_pod(window: float = 120.0) -> Snapshot:
    """One pod scraped idle at T0 and overloaded `window` seconds later (the real captures)."""
    history = History(retention=window)
    cumulative = sorted(s for fam in (vllm.TTFT, vllm.TPOT) for n in fam for s in histogram_samples(n))
    history.add(T0, capture("metrics-idle.prom"), cumulative)
    overloaded = capture("metrics-overloaded.prom")
    history.add(T0 + window, overloaded, cumulative)
    return Snapshot({"namespace": "ml", "pod": "vllm-0"}, T0 + window, overloaded, history)


def histogram_metric(base: str, statistic: Statistic, quantile: float = 0.9) -> MetricDef:
    metric = catalogue.builtin(base)
    assert isinstance(metric.spec, HistogramSpec)
    return metric.with_overrides(
        spec=HistogramSpec(metric.spec.family, statistic, 120.0, quantile, metric.spec.buckets)
    )


EVERYTHING = selectors.parse("")


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        # sums 24 running + 575 waiting of the overloaded page
        pytest.param(catalogue.builtin("vllm_requests_inflight"), 599.0, id="inflight gauge"),
        pytest.param(catalogue.builtin("vllm_kv_cache_usage"), 0.9599413776257939, id="kv usage gauge"),
        # (9346.752952575684 - 0.08400368690490723) / (4162 - 4)
        pytest.param(
            histogram_metric("vllm_ttft_seconds", Statistic.MEAN), 2.247876130083881, id="ttft mean"
        ),
        # rank 0.9 x 4158 = 3742.2 in (7.5, 10] holding 3688..3957: 7.5 + 2.5 x 54.2/269
        pytest.param(
            histogram_metric("vllm_ttft_seconds", Statistic.QUANTILE), 8.003717472118959, id="ttft p90"
        ),
        # rank 2079 in (0.1, 0.25] holding 1637..2183: 0.1 + 0.15 x 442/546
        pytest.param(
            histogram_metric("vllm_ttft_seconds", Statistic.QUANTILE, 0.5), 0.22142857142857142, id="ttft p50"
        ),
        # (11.475196133004454 - 0.007655124984127709) / (4137 - 4)
        pytest.param(catalogue.builtin("vllm_tpot_seconds"), 0.0027746288429761254, id="tpot mean"),
    ],
)
def test_real_captures(metric: MetricDef, expected: float) -> None:
    """Two real scrapes, the first exactly at the window start, give the hand-computed deltas."""
    sample = evaluate(metric, [real_pod()], EVERYTHING, T0 + 120.0)
    assert sample is not None
    assert sample.value == pytest.approx(expected, rel=1e-9)
    assert (sample.timestamp, sample.targets) == (T0 + 120.0, 1)


def test_real_tpot_quantile_is_raw_and_unresolved() -> None:
    """All 4,133 real TPOT observations fell in the first bucket (<= 10 ms): the source reports
    histogram_quantile's artefact (0.009) as the raw fact, and the catalogue's rule, which the
    provider applies once for every source, calls it unresolved (vllm-metrics.md §8)."""
    metric = histogram_metric("vllm_tpot_seconds", Statistic.QUANTILE)
    sample = evaluate(metric, [real_pod()], EVERYTHING, T0 + 120.0)
    assert sample is not None
    assert sample.value == pytest.approx(0.009)
    with pytest.raises(Unresolved, match=r"p90 of vllm_tpot_seconds = 0\.009 lies in the first bucket"):
        checked_value(metric, sample.value)


def gauge_pod(pod: str, values: dict[str, dict[Labels, float]], time: float = T0, **labels: str) -> Snapshot:
    return Snapshot({"namespace": "ml", "pod": pod, **labels}, time, values, History(0.0))


def gauge_metric(aggregation: Aggregation, *families: vllm.Family) -> MetricDef:
    return MetricDef("g", "test gauge", "requests", GaugeSpec(families, aggregation))


A: Labels = (("engine", "0"), ("model_name", "a"))
B: Labels = (("engine", "0"), ("model_name", "b"))
NEW, OLD = vllm.KV_CACHE_USAGE


@pytest.mark.parametrize(
    ("metric", "pods", "selector", "expected"),
    [
        pytest.param(
            gauge_metric(Aggregation.SUM, vllm.NUM_REQUESTS_RUNNING, vllm.NUM_REQUESTS_WAITING),
            [
                gauge_pod(
                    "p0", {"vllm:num_requests_running": {A: 2.0}, "vllm:num_requests_waiting": {A: 3.0}}
                ),
                gauge_pod(
                    "p1", {"vllm:num_requests_running": {A: 4.0}, "vllm:num_requests_waiting": {A: 0.0}}
                ),
            ],
            "",
            (9.0, 2),
            id="families aggregated then summed",
        ),
        pytest.param(
            gauge_metric(Aggregation.SUM, vllm.NUM_REQUESTS_RUNNING, vllm.NUM_REQUESTS_WAITING),
            [gauge_pod("p0", {"vllm:num_requests_running": {A: 2.0}})],
            "",
            (None, 1),
            id="a family without series empties the sum as in PromQL",
        ),
        pytest.param(
            gauge_metric(Aggregation.AVG, vllm.KV_CACHE_USAGE),
            [gauge_pod("p0", {NEW: {A: 0.2}, OLD: {A: 0.9}}), gauge_pod("p1", {OLD: {A: 0.6}})],
            "",
            (0.4, 2),
            id="alias only where the newer name is absent",
        ),
        pytest.param(
            gauge_metric(Aggregation.AVG, vllm.KV_CACHE_USAGE),
            [gauge_pod("p0", {NEW: {A: 0.2, B: 0.4}})],
            "",
            (pytest.approx(0.3), 1),
            id="avg over every engine and model of a pod",
        ),
        pytest.param(
            gauge_metric(Aggregation.MAX, vllm.KV_CACHE_USAGE),
            [gauge_pod("p0", {NEW: {A: math.nan}}), gauge_pod("p1", {NEW: {A: 0.5}})],
            "",
            (0.5, 2),
            id="max skips NaN",
        ),
        pytest.param(
            gauge_metric(Aggregation.SUM, vllm.NUM_REQUESTS_WAITING),
            [
                gauge_pod("p0", {"vllm:num_requests_waiting": {A: 1.0, B: 2.0}}),
                gauge_pod("p1", {"vllm:num_requests_waiting": {B: 4.0}}),
            ],
            "model_name=b",
            (6.0, 2),
            id="exposition label selects series",
        ),
        pytest.param(
            gauge_metric(Aggregation.SUM, vllm.NUM_REQUESTS_WAITING),
            [
                gauge_pod("p0", {"vllm:num_requests_waiting": {A: 1.0, B: 2.0}}),
                gauge_pod("p1", {"vllm:num_requests_waiting": {B: 4.0}}),
            ],
            "model_name=a",
            (1.0, 1),
            id="targets count only pods with matching series",
        ),
        pytest.param(
            gauge_metric(Aggregation.SUM, vllm.NUM_REQUESTS_WAITING),
            [
                gauge_pod("p0", {"vllm:num_requests_waiting": {A: 1.0}}),
                gauge_pod("p1", {"vllm:num_requests_waiting": {A: 4.0}}),
            ],
            "pod in (p1)",
            (4.0, 1),
            id="pod label from discovery selects pods",
        ),
        pytest.param(
            gauge_metric(Aggregation.SUM, vllm.NUM_REQUESTS_WAITING),
            [
                gauge_pod("p0", {"vllm:num_requests_waiting": {A: 1.0}}, app_kubernetes_io_instance="x"),
                gauge_pod("p1", {"vllm:num_requests_waiting": {A: 4.0}}),
            ],
            "app.kubernetes.io/instance=x",
            (1.0, 1),
            id="kubernetes label keys are mapped as in PromQL",
        ),
        pytest.param(
            gauge_metric(Aggregation.SUM, vllm.NUM_REQUESTS_WAITING),
            [gauge_pod("p0", {"vllm:num_requests_waiting": {A: 1.0, (("model_name", "c"),): 8.0}})],
            "engine!=0",
            (8.0, 1),
            id="not-equal matches a series without the label",
        ),
        pytest.param(
            gauge_metric(Aggregation.SUM, vllm.NUM_REQUESTS_WAITING),
            [gauge_pod("p0", {"vllm:num_requests_waiting": {(("model_name", "a"), ("pod", "spoof")): 5.0}})],
            "pod=spoof",
            None,
            id="target labels win over exposition labels",
        ),
    ],
)
def test_gauges(
    metric: MetricDef, pods: list[Snapshot], selector: str, expected: tuple[float | None, int] | None
) -> None:
    """Gauge aggregation and selection mean what `promql.catalogue.value_query` means."""
    sample = evaluate(metric, pods, selectors.parse(selector), T0)
    if expected is None:
        assert sample is None
        return
    assert sample is not None
    assert (sample.value, sample.targets) == expected


def test_timestamp_is_the_oldest_latest_scrape() -> None:
    """The sample is as old as the stalest pod that contributed to it."""
    metric = gauge_metric(Aggregation.SUM, vllm.NUM_REQUESTS_WAITING)
    pods = [
        gauge_pod("p0", {"vllm:num_requests_waiting": {A: 1.0}}, time=T0 - 0.4),
        gauge_pod("p1", {"vllm:num_requests_waiting": {A: 1.0}}, time=T0 - 0.1),
        gauge_pod("p2", {"vllm:num_requests_waiting": {B: 1.0}}, time=T0 - 9.0),
    ]
    sample = evaluate(metric, pods, selectors.parse("model_name=a"), T0)
    assert sample is not None
    assert sample.timestamp == T0 - 0.4


def histogram_pod(scrapes: list[tuple[float, float, float]], name: str = vllm.TTFT[0]) -> Snapshot:
    """A pod whose histogram has one finite bucket le=1: (time, count, sum) per scrape; every
    observation is below 1 s."""
    history = History(retention=300.0)
    page: Page = {}
    bucket, total, count = histogram_samples(name)
    for t, n, s in scrapes:
        page = {
            bucket: {
                (*ENGINE0[:1], ("le", "1.0"), *ENGINE0[1:]): n,
                (*ENGINE0[:1], ("le", "+Inf"), *ENGINE0[1:]): n,
            },
            total: {ENGINE0: s},
            count: {ENGINE0: n},
        }
        history.add(t, page, [bucket, total, count])
    return Snapshot({"namespace": "ml", "pod": "p"}, scrapes[-1][0], page, history)


TTFT_MEAN = histogram_metric("vllm_ttft_seconds", Statistic.MEAN)


def test_a_rate_before_two_scrapes_is_warming_up_not_a_number() -> None:
    """With one scrape there is no rate: the source says so rather than serve on_empty's 0."""
    with pytest.raises(SourceUnavailable, match="a rate needs two scrapes within its 120s window"):
        evaluate(TTFT_MEAN, [histogram_pod([(T0, 10.0, 1.0)])], EVERYTHING, T0)


@pytest.mark.parametrize("statistic", [Statistic.MEAN, Statistic.QUANTILE])
def test_no_observation_in_the_window_is_nan(statistic: Statistic) -> None:
    """Δcount = 0 over the window: targets exist, and the raw value is PromQL's 0/0, NaN (the
    provider applies on_empty); no source turns it into a number or into "no data" itself."""
    pod = histogram_pod([(T0, 10.0, 1.0), (T0 + 60, 10.0, 1.0)])
    sample = evaluate(histogram_metric("vllm_ttft_seconds", statistic), [pod], EVERYTHING, T0 + 60)
    assert sample is not None
    assert sample.value is not None and math.isnan(sample.value)
    assert (sample.targets, sample.gaps) == (1, ())


def test_a_histogram_without_series_in_the_window_is_none() -> None:
    """A pod whose `_count` exists but whose `_sum` has no rate (it appeared in the last scrape):
    no data at all, `None`."""
    history = History(retention=300.0)
    bucket, total, count = histogram_samples(vllm.TTFT[0])
    history.add(T0, {count: {ENGINE0: 1.0}}, [bucket, total, count])
    history.add(T0 + 60, {count: {ENGINE0: 2.0}, total: {ENGINE0: 0.5}}, [bucket, total, count])
    pod = Snapshot({"namespace": "ml", "pod": "p"}, T0 + 60, {count: {ENGINE0: 2.0}}, history)
    sample = evaluate(TTFT_MEAN, [pod], EVERYTHING, T0 + 60)
    assert sample is not None
    assert (sample.value, sample.targets) == (None, 1)


def test_mean_across_a_counter_reset() -> None:
    """A pod restarts between scrapes: count 10 → 4, sum 5 → 1. Like rate(), the reset adds the
    last value before it: Δcount = (4 - 10) + 10 + (8 - 4) = 8, Δsum = (1 - 5) + 5 + (3 - 1) = 3;
    the mean is 3/8, not a negative or inflated number."""
    pod = histogram_pod([(T0, 10.0, 5.0), (T0 + 40, 4.0, 1.0), (T0 + 80, 8.0, 3.0), (T0 + 120, 8.0, 3.0)])
    sample = evaluate(TTFT_MEAN, [pod], EVERYTHING, T0 + 120)
    assert sample is not None
    assert sample.value == pytest.approx(3 / 8)


def test_an_alias_fills_in_only_where_the_newer_name_has_no_rate() -> None:
    """`rate(new) or rate(old)`: one pod on an old vLLM, one on a new one, both count."""
    tpot = catalogue.builtin("vllm_tpot_seconds")
    new = histogram_pod([(T0, 0.0, 0.0), (T0 + 120, 100.0, 2.0)], vllm.TPOT[0])
    old = histogram_pod([(T0, 0.0, 0.0), (T0 + 120, 300.0, 12.0)], vllm.TPOT[1])
    sample = evaluate(tpot, [new, old], EVERYTHING, T0 + 120)
    assert sample is not None
    assert sample.targets == 2
    assert sample.value == pytest.approx(14 / 400)


def test_present_counts_histogram_targets_by_count_series() -> None:
    """A histogram's targets are the pods with its `_count` (as presence_query), not other series."""
    pod = histogram_pod([(T0, 1.0, 1.0)])
    assert present(TTFT_MEAN, [pod], EVERYTHING) == [pod]
    assert present(TTFT_MEAN, [pod], selectors.parse("model_name=other")) == []
    assert present(catalogue.builtin("vllm_requests_waiting"), [pod], EVERYTHING) == []


def test_a_histogram_statistic_is_as_old_as_its_stalest_pod() -> None:
    """A rate's newest point on each pod is that pod's latest scrape; the statistic is dated by the
    oldest of them (the pod that was scraped last 15 s ago), not by the evaluation time."""
    fresh = histogram_pod([(T0, 0.0, 0.0), (T0 + 60, 10.0, 1.0)])
    stale = histogram_pod([(T0, 0.0, 0.0), (T0 + 45, 30.0, 6.0)])
    sample = evaluate(TTFT_MEAN, [fresh, stale], EVERYTHING, T0 + 60)
    assert sample is not None
    assert (sample.timestamp, sample.targets) == (T0 + 45, 2)


def _counting_pod(counts: list[tuple[float, float]]) -> Snapshot:
    """One pod whose TTFT histogram `_count` reads `count` at each `(seconds after T0, count)`."""
    name = vllm.TTFT[0]
    history = History(retention=600.0)
    page: Page = {}
    for offset, count in counts:
        page = {
            f"{name}_count": {ENGINE0: count},
            f"{name}_sum": {ENGINE0: count * 0.1},
            f"{name}_bucket": {(*ENGINE0, ("le", "+Inf")): count},
        }
        history.add(T0 + offset, page, sorted(page))
    return Snapshot({"namespace": "ml", "pod": "vllm-0"}, T0 + counts[-1][0], page, history)


def test_the_forecast_adds_the_trend_carried_over_the_horizon() -> None:
    """Requests starting at 1/s for a minute, then 2/s: the trend is +1/s per minute, carried over the
    75 s horizon and half the 60 s window (x 1.75): 2 + 1.75 = 3.75 requests per second."""
    metric = catalogue.forecast(75.0, 60.0)
    counts = [(float(t), float(t)) for t in range(0, 61, 5)]
    counts += [(float(t), 60.0 + 2 * (t - 60)) for t in range(65, 121, 5)]
    sample = evaluate(metric, [_counting_pod(counts)], EVERYTHING, T0 + 120.0)
    assert sample is not None and sample.value == pytest.approx(3.75, rel=0.01)


def test_the_forecast_without_the_earlier_window_is_the_rate() -> None:
    """A fleet younger than two windows has no trend yet: the rate itself, never an empty value."""
    metric = catalogue.forecast(75.0, 60.0)
    sample = evaluate(
        metric, [_counting_pod([(0.0, 0.0), (30.0, 60.0), (60.0, 120.0)])], EVERYTHING, T0 + 60.0
    )
    assert sample is not None and sample.value == pytest.approx(2.0, rel=0.01)


def test_a_falling_forecast_is_never_negative() -> None:
    metric = catalogue.forecast(600.0, 60.0)
    counts = [(float(t), 5.0 * t) for t in range(0, 61, 5)]
    counts += [(float(t), 300.0 + 0.1 * (t - 60)) for t in range(65, 121, 5)]
    sample = evaluate(metric, [_counting_pod(counts)], EVERYTHING, T0 + 120.0)
    assert sample is not None and sample.value == 0.0
