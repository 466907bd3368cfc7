"""`vllm_saturation` in the PromQL vocabulary (adapter/vocabulary/promql/catalogue.py), and agreeing with the
scrape source.

The rendering is checked as text where its shape matters (one term needs no `max`; a pod is a group of
namespace, pod and instance), and as arithmetic by a real PromQL engine: promtool evaluates the
rendered query over the series of tests/saturation_fleet.py and must give the value the scrape
source's evaluation computes from the same numbers as pages.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from adapter.sources.evaluation import evaluate
from adapter.vocabulary import catalogue, selectors
from adapter.vocabulary.catalogue import MetricDef, SaturationSpec
from adapter.vocabulary.promql.catalogue import TERM_LABEL, Divisors, saturation, served_query, value_query
from adapter.vocabulary.promql.combined import combined_query, freshness_selectors
from adapter.vocabulary.promql.expressions import number, request_matchers, series
from adapter.vocabulary.promql.parse import parse_template
from tests import saturation_fleet as fleet
from tests.rule_files import binary, run

M = ['namespace="prod"', 'model_name="llama"']
POD = "namespace, pod, instance"


def test_capacity_alone_is_the_mean_of_inflight_over_capacity_without_max() -> None:
    """One term: per pod (running + waiting) / capacity, then the mean over pods; no `max`, no label."""
    query = value_query(catalogue.saturation(48), M)
    running = f"sum by ({POD}) (vllm:num_requests_running{{{', '.join(M)}}})"
    waiting = f"sum by ({POD}) ({series(catalogue.WAITING_FOR_CAPACITY, M)})"
    assert query == f"avg(({running} + {waiting}) / 48)"


def test_three_terms_take_each_pods_largest_before_the_mean() -> None:
    """Each term is labelled apart (so `or` keeps all three of a pod), `max` per pod drops the label,
    `avg` averages pods; KV reads both of its names, averaged over the pod's engines."""
    query = value_query(catalogue.saturation(48, 0.9, 4), M)
    assert query.startswith(f"avg(max by ({POD}) (label_replace(")
    for term, divisor in (("inflight", "48"), ("kv", "0.9"), ("queue", "4")):
        assert f' / {divisor}, "{TERM_LABEL}", "{term}", "", "")' in query
    assert f"avg by ({POD}) (vllm:kv_cache_usage_perc{{" in query
    assert "or vllm:gpu_cache_usage_perc{" in query
    parse_template(query, [])


def test_grouping_keeps_the_groups_through_the_per_pod_step() -> None:
    """With `by` (recording rules, dashboards), a pod's group also carries the `by` labels, so the
    outer mean can regroup by them."""
    query = value_query(catalogue.saturation(48, 0.9), M, by=("namespace", "model_name"))
    assert query.startswith("avg by (namespace, model_name) (max by (namespace, pod, instance, model_name) (")


def test_divisors_may_be_dashboard_variables() -> None:
    """The same query with Grafana variables in place of the configured numbers."""
    spec = catalogue.saturation(1, 1, 1).spec
    assert isinstance(spec, SaturationSpec)
    query = saturation(spec, M, divisors=Divisors("$capacity", "$kv_target", "$queue_target"))
    configured = value_query(catalogue.saturation(7, 0.5, 3), M)
    assert query == configured.replace("/ 7,", "/ $capacity,").replace("/ 0.5,", "/ $kv_target,").replace(
        "/ 3,", "/ $queue_target,"
    )


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (48.0, "48"),
        (0.85, "0.85"),
        (1 / 3, "0.3333333333333333"),
        (math.inf, "Inf"),
        (2.0**60, "1.152921504606847e+18"),
    ],
)
def test_number_literals_read_back_exactly(value: float, literal: str) -> None:
    """The divisor PromQL reads is the float the scrape source divides by."""
    assert number(value) == literal
    assert float(literal.replace("Inf", "inf")) == value


def test_served_query_is_the_value_query() -> None:
    """No quantile rule applies: the dashboards plot what the adapter sends."""
    metric = catalogue.saturation(48, 0.9, 4)
    assert served_query(metric, M) == value_query(metric, M)


@pytest.mark.parametrize(
    ("metric", "kv_read"),
    [(catalogue.saturation(48), False), (catalogue.saturation(48, 0.9), True)],
    ids=["capacity only", "with kv_target"],
)
def test_combined_query_checks_gaps_of_the_gauges_it_reads(metric: MetricDef, kv_read: bool) -> None:
    """The gauge rule covers running and waiting always, KV usage only when its term is in; every
    core gauge still dates the value and proves a pod present."""
    query = combined_query(metric, M)
    assert '"adapter_ref", "vllm:num_requests_running"' in query
    assert '"adapter_ref", "vllm:num_requests_waiting"' in query
    assert ('"adapter_ref", "vllm:kv_cache_usage_perc"' in query) == kv_read
    assert any("kv_cache_usage_perc" in s for s in freshness_selectors(metric, M))
    parse_template(query, [])


# --- Both renderings on the same numbers --------------------------------------------------------


VARIANTS = [
    pytest.param(catalogue.saturation(10), id="capacity only"),
    pytest.param(catalogue.saturation(10, 0.8), id="capacity and kv_target"),
    pytest.param(catalogue.saturation(10, queue_target=4), id="capacity and queue_target"),
    pytest.param(catalogue.saturation(10, 0.8, 4), id="all three terms"),
    pytest.param(catalogue.saturation(24, 0.95, 1.5), id="other parameters"),
]


def _promtool_agrees(tmp_path: Path, query: str, expected: float) -> None:
    """promtool evaluates `query` over the fleet's series; it must be within 1e-12 of `expected`."""
    test = {
        "rule_files": [],
        "tests": [
            {
                "interval": "1m",
                "input_series": fleet.input_series(),
                "promql_expr_test": [
                    {
                        # Prometheus' avg accumulates incrementally: compare within rounding, not bits.
                        "expr": f"abs(({query}) - {expected!r}) < bool 1e-12",
                        "eval_time": "2m",
                        "exp_samples": [{"labels": "{}", "value": 1}],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "saturation-test.yaml"
    path.write_text(yaml.safe_dump(test), encoding="utf-8")
    result = run([binary("promtool"), "test", "rules", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("metric", VARIANTS)
def test_promql_and_the_scrape_source_compute_the_same_value(tmp_path: Path, metric: MetricDef) -> None:
    """promtool's PromQL over the series and the scrape evaluation over the pages agree."""
    selector = selectors.parse("model_name=llama")
    sample = evaluate(metric, fleet.snapshots(), selector, fleet.T0)
    assert sample is not None and sample.value is not None and sample.gaps == ()
    query = value_query(metric, request_matchers(metric, fleet.NAMESPACE, selector))
    _promtool_agrees(tmp_path, query, sample.value)


def test_the_hand_computed_fleet_value(tmp_path: Path) -> None:
    """The fleet's docstring arithmetic: (0.8 + 0.95 + 1.5) / 3, each pod bound by another term."""
    metric = catalogue.saturation(10, 0.8, 4)
    query = value_query(
        metric, request_matchers(metric, fleet.NAMESPACE, selectors.parse("model_name=llama"))
    )
    _promtool_agrees(tmp_path, query, (0.8 + 0.95 + 1.5) / 3)
