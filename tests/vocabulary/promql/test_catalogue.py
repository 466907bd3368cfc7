"""The catalogue rendered as PromQL: aliases, aggregation over engines and pods, one combined query."""

from __future__ import annotations

import pytest

from adapter.vocabulary import catalogue, vllm
from adapter.vocabulary.catalogue import MetricDef, PromQLSpec, Statistic
from adapter.vocabulary.promql.catalogue import presence_query, served_query, value_query
from adapter.vocabulary.promql.combined import combined_query, freshness_selectors
from adapter.vocabulary.promql.expressions import (
    aggregate,
    duration,
    histogram_mean,
    histogram_quantile,
    increase,
    rate,
    resolved,
    selector,
    series,
)
from adapter.vocabulary.promql.parse import parse_template

M = ['namespace="prod"', 'model_name="llama"']


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(
            "vllm_requests_waiting",
            'sum(label_replace(vllm:num_requests_waiting_by_reason{reason="capacity", namespace="prod", '
            'model_name="llama"},'
            ' "reason", "", "", "") or vllm:num_requests_waiting{namespace="prod", model_name="llama"})',
            id="waiting sums the capacity part over pods and engines, the plain gauge on older servers",
        ),
        pytest.param(
            "vllm_requests_inflight",
            'sum(vllm:num_requests_running{namespace="prod", model_name="llama"})'
            ' + sum(label_replace(vllm:num_requests_waiting_by_reason{reason="capacity", namespace="prod", '
            'model_name="llama"},'
            ' "reason", "", "", "") or vllm:num_requests_waiting{namespace="prod", model_name="llama"})',
            id="inflight adds two separately aggregated families",
        ),
        pytest.param(
            "vllm_kv_cache_usage",
            'avg(vllm:kv_cache_usage_perc{namespace="prod", model_name="llama"}'
            ' or vllm:gpu_cache_usage_perc{namespace="prod", model_name="llama"})',
            id="kv usage averages and falls back to the pre-0.9.2 name",
        ),
        pytest.param(
            "vllm_tpot_seconds",
            'sum(rate(vllm:request_time_per_output_token_seconds_sum{namespace="prod", '
            'model_name="llama"}[2m])'
            ' or rate(vllm:time_per_output_token_seconds_sum{namespace="prod", model_name="llama"}[2m]))'
            ' / sum(rate(vllm:request_time_per_output_token_seconds_count{namespace="prod", '
            'model_name="llama"}[2m])'
            ' or rate(vllm:time_per_output_token_seconds_count{namespace="prod", model_name="llama"}[2m]))',
            id="tpot is the mean by default with the pre-0.11 alias",
        ),
        pytest.param(
            "vllm_ttft_seconds",
            "histogram_quantile(0.9, sum by (le) "
            '(rate(vllm:time_to_first_token_seconds_bucket{namespace="prod",'
            ' model_name="llama"}[2m])))',
            id="ttft p90 aggregates buckets by le only",
        ),
    ],
)
def test_builtin_queries(name: str, expected: str) -> None:
    """Each built-in metric renders the documented PromQL."""
    assert value_query(catalogue.builtin(name), M) == expected


def test_no_matchers_render_bare_selectors() -> None:
    """An empty matcher list never produces `{}` (invalid without a metric name elsewhere)."""
    assert value_query(catalogue.builtin("vllm_requests_running"), []) == "sum(vllm:num_requests_running)"


def test_quantile_statistic_for_tpot() -> None:
    """Switching TPOT to a quantile renders histogram_quantile over the same families."""
    tpot = catalogue.builtin("vllm_tpot_seconds")
    spec = tpot.spec
    assert isinstance(spec, catalogue.HistogramSpec)
    quantile = tpot.with_overrides(
        spec=catalogue.HistogramSpec(spec.family, Statistic.QUANTILE, 300, 0.95, spec.buckets)
    )
    query = value_query(quantile, M)
    assert query.startswith(
        "histogram_quantile(0.95, sum by (le) (rate(vllm:request_time_per_output_token_seconds_bucket"
    )
    assert "[5m]" in query and "time_per_output_token_seconds_bucket" in query


def test_user_query_placeholder() -> None:
    """<<.LabelMatchers>> takes the request's matchers; without matchers it leaves a valid trailing comma."""
    user = MetricDef("q", "h", "", PromQLSpec('sum(sqs{queue="a", <<.LabelMatchers>>})'))
    assert value_query(user, M) == 'sum(sqs{queue="a", namespace="prod", model_name="llama"})'
    assert value_query(user, []) == 'sum(sqs{queue="a", })'
    assert presence_query(user, M) is None


def test_combined_query_dates_by_every_raw_selector() -> None:
    """Value, target count and one `min(timestamp(selector))` per raw selector come back in one query,
    told apart by adapter_part (and adapter_ref), never `timestamp()` of an expression."""
    query = combined_query(catalogue.builtin("vllm_kv_cache_usage"), M)
    for part in ('"value"', '"count"', '"timestamp"'):
        assert f'"adapter_part", {part}' in query
    for name in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"):
        assert f'min(timestamp({name}{{namespace="prod", model_name="llama"}}))' in query
    assert '"adapter_ref", "0"' in query and '"adapter_ref", "1"' in query
    assert "timestamp((" not in query and "timestamp(sum" not in query


@pytest.mark.parametrize("metric", catalogue.BUILTIN, ids=lambda m: m.name)
def test_freshness_selectors_of_the_catalogue(metric: MetricDef) -> None:
    """Every name of every presence family (a histogram's `_count`) is a raw selector to date the value
    by, each once (the plain waiting gauge is in two families of `vllm_requests_inflight`)."""
    expected = []
    for family in catalogue.presence_families(metric.spec):  # type: ignore[arg-type]
        for name, fixed in map(vllm.split_member, family):
            labels = [*(f'{key}="{value}"' for key, value in fixed), *M]
            expected.append(f"{name}{{{', '.join(labels)}}}")
    assert list(freshness_selectors(metric, M)) == list(dict.fromkeys(expected))


def test_freshness_selectors_of_user_promql() -> None:
    """User PromQL is read by the parser: range and subquery selectors count, modifiers are dropped,
    the presence query's selectors count too, and each selector once."""
    user = MetricDef(
        "q",
        "h",
        "",
        PromQLSpec(
            "sum(rate(a{<<.LabelMatchers>>}[5m] offset 1h)) / sum(b{<<.LabelMatchers>>} @ 100)"
            " + max_over_time(sum(a{<<.LabelMatchers>>})[10m:1m])",
            presence='up{job="exporter", <<.LabelMatchers>>}',
        ),
    )
    assert freshness_selectors(user, ['namespace="prod"']) == (
        'a{namespace="prod"}',
        'b{namespace="prod"}',
        'up{job="exporter", namespace="prod"}',
    )


def test_gauge_gap_parts() -> None:
    """A gauge of several families asks, per family, which targets lack it and where it is NaN/Inf."""
    query = combined_query(catalogue.builtin("vllm_requests_inflight"), M)
    by = "by (namespace, pod, instance)"
    assert query.count('"adapter_part", "absent"') == 2
    assert query.count('"adapter_part", "nonfinite"') == 2
    waiting = 'vllm:num_requests_waiting{namespace="prod", model_name="llama"}'
    capacity = 'vllm:num_requests_waiting_by_reason{reason="capacity", namespace="prod", model_name="llama"}'
    assert f'unless group {by} (label_replace({capacity}, "reason", "", "", "") or {waiting})' in query
    assert (
        f"max {by} ({capacity} != {capacity} or abs({capacity}) == Inf"
        f" or {waiting} != {waiting} or abs({waiting}) == Inf)"
    ) in query, "either name NaN or infinite is a gap"
    single = combined_query(catalogue.builtin("vllm_requests_waiting"), M)
    # one family, yet a pod with any core vLLM gauge and no waiting series is a target lacking it
    assert single.count('"absent"') == 1 and single.count('"nonfinite"') == 1
    every = single.split(f"group {by} (")[1].split(" unless ")[0]  # the targets the absent part checks
    assert "vllm:num_requests_running" in every
    assert '"absent"' not in combined_query(catalogue.builtin("vllm_ttft_seconds"), M)


def test_histogram_presence_uses_count_series_with_aliases() -> None:
    """A histogram's targets are proven by its _count series under either name."""
    presence = presence_query(catalogue.builtin("vllm_tpot_seconds"), [])
    assert (
        presence
        == "(vllm:request_time_per_output_token_seconds_count or vllm:time_per_output_token_seconds_count)"
    )


@pytest.mark.parametrize(
    ("seconds", "text"), [(120, "2m"), (3600, "1h"), (45, "45s"), (0.5, "500ms"), (90, "90s"), (7200, "2h")]
)
def test_duration(seconds: float, text: str) -> None:
    """Windows render as PromQL durations."""
    assert duration(seconds) == text


def test_request_matchers_put_the_namespace_first_unless_the_metric_opts_out() -> None:
    """Both sources build a request's matchers here: namespace,
    then the selector's; none for namespaced: false."""
    from adapter.vocabulary.promql.expressions import request_matchers
    from adapter.vocabulary.selectors import parse

    waiting = catalogue.builtin("vllm_requests_waiting")
    assert request_matchers(waiting, "prod", parse("model_name=llama")) == [
        'namespace="prod"',
        'model_name="llama"',
    ]
    assert request_matchers(waiting, None, parse("")) == []
    global_metric = waiting.with_overrides(namespaced=False)
    assert request_matchers(global_metric, "prod", parse("a=b")) == ['a="b"']


# --- The vocabulary ------------------------------------------------------------------------------------


def test_selector_and_series_spell_every_alias() -> None:
    """A selector without matchers is the bare name; a family is every alias joined by `or`, newest first."""
    assert selector("up") == "up"
    assert selector("up", ['job="a"', 'pod=~"b"']) == 'up{job="a", pod=~"b"}'
    assert series(("new", "old"), ['ns="x"']) == 'new{ns="x"} or old{ns="x"}'


def test_rate_and_increase_take_a_suffix_and_an_offset() -> None:
    """Each alias gets its own range function; the histogram suffix and the offset apply to every one."""
    assert rate(("a", "b"), "5m") == "rate(a[5m]) or rate(b[5m])"
    assert rate(("h",), "2m", ['x="y"'], suffix="_count", offset="1h") == 'rate(h_count{x="y"}[2m] offset 1h)'
    assert increase(("c",), "24h", offset="1h") == "increase(c[24h] offset 1h)"


def test_aggregate_groups_only_when_asked() -> None:
    assert aggregate("sum", (), "x") == "sum(x)"
    assert aggregate("max", ("namespace", "pod"), "x") == "max by (namespace, pod) (x)"


def test_histogram_statistics() -> None:
    """The mean is Δsum/Δcount with the same grouping on both sides; a quantile groups by `le` first."""
    assert histogram_mean(("h",), "1m", by=("pod",)) == (
        "sum by (pod) (rate(h_sum[1m])) / sum by (pod) (rate(h_count[1m]))"
    )
    assert histogram_quantile(0.99, ("h",), "1m", by=("pod",)) == (
        "histogram_quantile(0.99, sum by (le, pod) (rate(h_bucket[1m])))"
    )


def test_resolved_keeps_a_quantile_strictly_inside_its_finite_buckets() -> None:
    """The dashboards' and the server's rule: a gap where the first bucket or the +Inf one holds it."""
    assert resolved("q", (0.01, 0.5, 80.0)) == "(q > 0.01) < 80"
    assert resolved("q", ()) == "q"
    ttft = catalogue.builtin("vllm_ttft_seconds")
    assert served_query(ttft, M) == f"({value_query(ttft, M)} > 0.001) < 2560"
    waiting = catalogue.builtin("vllm_requests_waiting")
    assert served_query(waiting, M, by=("pod",)) == value_query(waiting, M, by=("pod",))


def test_the_forecast_is_the_rate_plus_its_trend_and_never_negative() -> None:
    """rate over the window, plus (rate - rate one window earlier) x (horizon + window / 2) / window;
    `or ... * 0` keeps a value (trend 0) while the earlier window is empty; it parses as PromQL."""
    metric = catalogue.forecast(75.0, 60.0)
    query = value_query(metric, ['namespace="ml"'])
    now = 'sum(rate(vllm:time_to_first_token_seconds_count{namespace="ml"}[1m]))'
    before = 'sum(rate(vllm:time_to_first_token_seconds_count{namespace="ml"}[1m] offset 1m))'
    assert query == f"clamp_min({now} + (({now} - {before}) or ({now} * 0)) * 1.75, 0)"
    parse_template(query, ())
    with pytest.raises(ValueError, match="offset"):
        value_query(metric, [], offset_seconds=3600)
