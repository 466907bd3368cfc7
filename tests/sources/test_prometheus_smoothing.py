"""A smoothed gauge through the Prometheus source: `avg_over_time` inside the aggregation, raw selectors
still dating the value (adapter/sources/prometheus.py, written by adapter/vocabulary/promql/).

The Prometheus HTTP API is faked (the `prom` fixture); tests/integration/test_smoothing_prometheus.py
checks the values against a real Prometheus.
"""

from __future__ import annotations

import dataclasses
import re

import promql_parser
import pytest

from adapter.config import load
from adapter.sources import Scope
from adapter.vocabulary import catalogue
from adapter.vocabulary.catalogue import GaugeSpec, MetricDef
from adapter.vocabulary.promql.combined import combined_query
from adapter.vocabulary.promql.expressions import request_matchers
from adapter.vocabulary.selectors import parse
from tests.sources.prometheus_fake import INFLIGHT, NOW, SEL, StartProm, answer, vector

RUNNING = 'vllm:num_requests_running{namespace="prod", model_name="llama"}'
WAITING = 'vllm:num_requests_waiting{namespace="prod", model_name="llama"}'


def smoothed(metric: MetricDef, seconds: float) -> MetricDef:
    assert isinstance(metric.spec, GaugeSpec)
    return metric.with_overrides(spec=dataclasses.replace(metric.spec, smoothing_seconds=seconds))


def configured(text: str, name: str) -> MetricDef:
    (metric,) = [m for m in load(text).catalogue() if m.name == name]
    return metric


def _mean(raw: str, window: str) -> str:
    return f"(avg_over_time({raw}[{window}]) and {raw})"


async def test_the_gauge_selector_is_averaged_inside_the_sum(prom: StartProm) -> None:
    """`sum((avg_over_time(x[30s]) and x))`: each series' mean, summed; the value read as sent."""
    metric = configured("metrics: {vllm_requests_inflight: {smoothing: 30s}}", "vllm_requests_inflight")
    source, seen = await prom(
        answer(vector(("value", 7.5), ("count", 2), ("timestamp", NOW - 3), ("timestamp", NOW - 1))),
    )
    try:
        sample = await source.fetch(metric, "prod", SEL)
    finally:
        await source.close()
    assert (sample.value, sample.targets) == (7.5, 2)
    query = seen[0].query
    assert f"sum({_mean(RUNNING, '30s')})" in query
    assert f"{_mean(WAITING, '30s')}" in query
    # The age still comes from the raw selectors (the newest sample of each series), never from
    # avg_over_time, which Prometheus would date with the evaluation time.
    assert f"min(timestamp({RUNNING}))" in query
    assert "timestamp((avg_over_time" not in query and "timestamp(avg_over_time" not in query
    assert sample.timestamp == pytest.approx(NOW - 3)


async def test_without_smoothing_no_mean_is_taken(prom: StartProm) -> None:
    source, seen = await prom(answer(vector(("value", 3), ("count", 1), ("timestamp", NOW))))
    try:
        await source.fetch(INFLIGHT, "prod", SEL)
    finally:
        await source.close()
    assert "avg_over_time" not in seen[0].query
    assert f"sum({RUNNING})" in seen[0].query


async def test_a_grouped_refresh_averages_inside_each_group(prom: StartProm) -> None:
    metric = smoothed(catalogue.builtin("vllm_requests_running"), 45.0)
    source, seen = await prom(answer(vector()))
    scopes = [Scope("prod", parse("model_name=llama")), Scope("prod", parse("model_name=qwen"))]
    try:
        await source.fetch_many(metric, scopes)
    finally:
        await source.close()
    (query,) = [s.query for s in seen]
    assert re.search(
        r"sum by \(namespace, model_name\) \(\(avg_over_time\(vllm:num_requests_running\{[^}]*\}\[45s\]\)",
        query,
    )


@pytest.mark.parametrize(
    ("name", "text", "window", "families"),
    [
        ("vllm_requests_inflight", "{smoothing: 30s}", "30s", 3),
        ("vllm_requests_waiting", "{smoothing: 2m}", "2m", 2),
        ("vllm_requests_running", "{smoothing: 30s}", "30s", 1),
        ("vllm_kv_cache_usage", "{smoothing: 90s}", "90s", 2),
        ("vllm_saturation", "{capacity: 10, kv_target: 0.9, queue_target: 4, smoothing: 30s}", "30s", 5),
        ("gateway_queue_size", "{smoothing: 30s}", "30s", 2),
    ],
)
@pytest.mark.parametrize("by", [(), ("namespace", "model_name")])
def test_every_smoothed_query_parses_and_averages_every_gauge_it_reads(
    name: str, text: str, window: str, families: int, by: tuple[str, ...]
) -> None:
    """The combined query is valid PromQL (a real parser), and every name of every gauge family the
    value reads (aliases and the waiting breakdown included) is read as its mean over the window,
    kept only where the series has a current sample."""
    metric = configured(f"metrics: {{{name}: {text}}}", name)
    query = combined_query(metric, request_matchers(metric, "prod", SEL), by)
    promql_parser.parse(query)
    value_part = query.split('"adapter_part", "value"')[0]
    averaged = re.findall(r"\(avg_over_time\(([^\[]*)\[(\w+)\]\) and ([^)]*\})\)", value_part)
    assert {w for _, w, _ in averaged} == {window}
    assert all(inner == current for inner, _, current in averaged)
    assert len({inner for inner, _, _ in averaged}) == families
    # no raw gauge read outside a mean: strip the means, and no selector of a gauge name is left
    rest = re.sub(r"\(avg_over_time\([^\[]*\[\w+\]\) and [^)]*\}\)", "", value_part)
    assert not re.search(r"[\w:]+\{", rest), rest


def test_a_present_pod_without_a_sample_in_the_window_is_a_gap() -> None:
    """The absent-gauge part asks about the smoothed series: a pod whose gauge has no sample inside
    a window shorter than Prometheus' scrape interval is reported, not silently left out of the sum."""
    metric = smoothed(catalogue.builtin("vllm_requests_running"), 20.0)
    query = combined_query(metric, request_matchers(metric, "prod", SEL))
    absent = next(p for p in query.split(" or label_replace(") if '"absent"' in p)
    assert f"unless group by (namespace, pod, instance) ({_mean(RUNNING, '20s')})" in absent
