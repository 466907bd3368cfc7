"""`value_query(..., by=..., offset_seconds=...)`: one series per group (recording rules) and baselines."""

from __future__ import annotations

import pytest

from adapter.vocabulary import catalogue
from adapter.vocabulary.catalogue import HistogramSpec, MetricDef, PromQLSpec, Statistic
from adapter.vocabulary.promql.catalogue import value_query
from adapter.vocabulary.promql.combined import combined_query

M = ['model_name!=""']
BY = ("namespace", "model_name")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(
            "vllm_requests_waiting",
            "sum by (namespace, model_name) ("
            + (
                'label_replace(vllm:num_requests_waiting_by_reason{reason="capacity", model_name!=""}, '
                '"reason", "", "", "") or vllm:num_requests_waiting{model_name!=""}'
            )
            + ")",
            id="a gauge sums per group",
        ),
        pytest.param(
            "vllm_kv_cache_usage",
            'avg by (namespace, model_name) (vllm:kv_cache_usage_perc{model_name!=""}'
            ' or vllm:gpu_cache_usage_perc{model_name!=""})',
            id="kv usage averages per group over both names",
        ),
        pytest.param(
            "vllm_tpot_seconds",
            "sum by (namespace, model_name) (rate(vllm:request_time_per_output_token_seconds_sum"
            '{model_name!=""}[2m]) or rate(vllm:time_per_output_token_seconds_sum{model_name!=""}[2m]))'
            " / sum by (namespace, model_name) (rate(vllm:request_time_per_output_token_seconds_count"
            '{model_name!=""}[2m]) or rate(vllm:time_per_output_token_seconds_count{model_name!=""}[2m]))',
            id="the mean groups numerator and denominator alike",
        ),
        pytest.param(
            "vllm_ttft_seconds",
            "histogram_quantile(0.9, sum by (le, namespace, model_name) "
            '(rate(vllm:time_to_first_token_seconds_bucket{model_name!=""}[2m])))',
            id="a quantile keeps le beside the group labels",
        ),
    ],
)
def test_by_groups_each_statistic(name: str, expected: str) -> None:
    """With `by`, every aggregation keeps the group labels, so a recording rule gets one series per group."""
    assert value_query(catalogue.builtin(name), M, by=BY) == expected


def test_without_by_the_rendering_is_unchanged() -> None:
    """The default (`by=()`) renders exactly what the adapter has always queried: a single series."""
    for metric in catalogue.BUILTIN:
        assert value_query(metric, M, by=()) == value_query(metric, M)
    assert value_query(catalogue.builtin("vllm_requests_running"), M) == (
        'sum(vllm:num_requests_running{model_name!=""})'
    )


def test_grouped_sum_of_families_keeps_groups_with_one_family() -> None:
    """Grouped `a + b` would drop a group that has only one family; the query adds it back with `or`."""
    query = value_query(catalogue.builtin("vllm_requests_inflight"), M, by=BY)
    running = 'sum by (namespace, model_name) (vllm:num_requests_running{model_name!=""})'
    waiting = (
        "sum by (namespace, model_name) ("
        + (
            'label_replace(vllm:num_requests_waiting_by_reason{reason="capacity", model_name!=""}, '
            '"reason", "", "", "") or vllm:num_requests_waiting{model_name!=""}'
        )
        + ")"
    )
    assert query == f"({running} + {waiting}) or {running} or {waiting}"


def test_offset_moves_every_rate_window_of_a_histogram() -> None:
    """`offset_seconds` shifts each rate of the statistic (both names, sum and count) into the past."""
    tpot = catalogue.builtin("vllm_tpot_seconds")
    spec = tpot.spec
    assert isinstance(spec, HistogramSpec)
    day = tpot.with_overrides(spec=HistogramSpec(spec.family, Statistic.MEAN, 86400, 0.9, spec.buckets))
    query = value_query(day, M, by=BY, offset_seconds=3600)
    assert query.count("[24h] offset 1h)") == 4
    assert "offset" not in value_query(day, M, by=BY)


def test_offset_applies_to_quantiles_too() -> None:
    """A quantile's bucket rates take the offset as well."""
    query = value_query(catalogue.builtin("vllm_ttft_seconds"), M, offset_seconds=600)
    assert 'rate(vllm:time_to_first_token_seconds_bucket{model_name!=""}[2m] offset 10m)' in query


@pytest.mark.parametrize(
    "metric",
    [
        pytest.param(catalogue.builtin("vllm_requests_waiting"), id="a gauge has no window to shift"),
        pytest.param(MetricDef("q", "h", "", PromQLSpec("sum(x{<<.LabelMatchers>>})")), id="user PromQL"),
    ],
)
def test_offset_is_refused_where_it_cannot_apply(metric: MetricDef) -> None:
    """An offset the query could not honour raises instead of being silently dropped."""
    with pytest.raises(ValueError, match="must only be used with a histogram metric"):
        value_query(metric, M, offset_seconds=60)


def test_by_leaves_user_promql_alone() -> None:
    """A user query's grouping is its author's: `by` does not rewrite it."""
    user = MetricDef("q", "h", "", PromQLSpec("sum(sqs{<<.LabelMatchers>>})"))
    assert value_query(user, M, by=BY) == 'sum(sqs{model_name!=""})'


def test_combined_query_without_by_is_the_per_key_query() -> None:
    """Without `by` every part aggregates to one series, as each key's own query always has."""
    query = combined_query(catalogue.builtin("vllm_requests_inflight"), M)
    assert "count((" in query and "min(timestamp(" in query
    assert "by (namespace, pod, instance) (" in query
    assert "model_name) (" not in query


def test_combined_query_by_keeps_the_group_labels_in_every_part() -> None:
    """With `by`, the value, the count, each raw selector's time and the gauge gaps are per group
    (gaps per target and group), and a sum of families is not patched with `or` as recording rules are."""
    query = combined_query(catalogue.builtin("vllm_requests_inflight"), M, BY)
    running = 'sum by (namespace, model_name) (vllm:num_requests_running{model_name!=""})'
    # waiting for capacity where a pod breaks its queue down by reason, else the plain gauge
    waiting = (
        "sum by (namespace, model_name) "
        '(label_replace(vllm:num_requests_waiting_by_reason{reason="capacity", '
        'model_name!=""}, "reason", "", "", "") or vllm:num_requests_waiting{model_name!=""})'
    )
    assert f'label_replace(({running} + {waiting}), "adapter_part", "value", "", "")' in query
    assert "count by (namespace, model_name) ((" in query
    # one row per group: the oldest of the five raw selectors (running, waiting by reason and plain,
    # kv under two names)
    assert query.count("min by (namespace, model_name) (label_replace(timestamp(") == 1
    assert query.count("label_replace(timestamp(") == 5
    assert "group by (namespace, pod, instance, model_name) (" in query
    assert "max by (namespace, pod, instance, model_name) (" in query


def test_combined_query_refuses_to_regroup_user_promql() -> None:
    """A user query's aggregations are its author's: grouping it is a bug, not a silent rewrite."""
    user = MetricDef("q", "h", "", PromQLSpec("sum(sqs{<<.LabelMatchers>>})"))
    with pytest.raises(ValueError, match="must not be regrouped"):
        combined_query(user, M, BY)
