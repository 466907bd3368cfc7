"""`metrics.<name>.smoothing` (adapter/config/metrics.py, the zero-or-more duration of
adapter/config/typed.py).

A gauge may be served as its mean over a window. The key is a duration like every other one, `0s`
or absent is off, and it must cover at least two refresh intervals of the active source; on a
histogram statistic, the forecast or user PromQL it is an error naming the key, the value and what
is valid.
"""

from __future__ import annotations

import pytest
import yaml

from adapter.config import load
from adapter.errors import ConfigError
from adapter.vocabulary import catalogue
from adapter.vocabulary.catalogue import GaugeSpec, MetricDef, SaturationSpec

GAUGES = ("vllm_requests_inflight", "vllm_requests_waiting", "vllm_requests_running", "vllm_kv_cache_usage")


def _metric(text: str, name: str) -> MetricDef:
    (metric,) = [m for m in load(text).catalogue() if m.name == name]
    return metric


def _smoothing(metric: MetricDef) -> float:
    assert isinstance(metric.spec, GaugeSpec)
    return metric.spec.smoothing_seconds


def test_the_lab_backtest_shape_is_valid_for_a_built_in() -> None:
    """The exact YAML the lab's backtest writes into adapter-config.yaml."""
    text = yaml.safe_dump({"metrics": {"vllm_requests_inflight": {"smoothing": "30s"}}})
    metric = _metric(text, "vllm_requests_inflight")
    assert _smoothing(metric) == 30.0
    # everything else of the built-in stays as it was
    assert metric.with_overrides(spec=catalogue.builtin("vllm_requests_inflight").spec) == catalogue.builtin(
        "vllm_requests_inflight"
    )


@pytest.mark.parametrize("name", GAUGES)
@pytest.mark.parametrize(("value", "seconds"), [("30s", 30.0), ("2m", 120.0), ("1.5m", 90.0), (45, 45.0)])
def test_every_built_in_gauge_takes_a_duration(name: str, value: object, seconds: float) -> None:
    assert _smoothing(_metric(yaml.safe_dump({"metrics": {name: {"smoothing": value}}}), name)) == seconds


@pytest.mark.parametrize(
    "text", ["{}", "{smoothing: 0s}", "{smoothing: 0}", "{smoothing: 0ms}", "{smoothing: null}"]
)
def test_absent_or_zero_is_off(text: str) -> None:
    metric = _metric(f"metrics: {{vllm_requests_running: {text}}}", "vllm_requests_running")
    assert metric == catalogue.builtin("vllm_requests_running")


def test_saturation_and_gateway_gauges_take_it() -> None:
    text = (
        "metrics:\n"
        "  vllm_saturation: {capacity: 48, kv_target: 0.9, smoothing: 1m}\n"
        "  gateway_queue_size: {smoothing: 20s}\n"
    )
    saturation = _metric(text, "vllm_saturation")
    assert isinstance(saturation.spec, SaturationSpec)
    assert (saturation.spec.smoothing_seconds, saturation.spec.capacity) == (60.0, 48.0)
    assert _smoothing(_metric(text, "gateway_queue_size")) == 20.0


def test_the_minimum_follows_the_active_source() -> None:
    """Twice the refresh interval: 10 s with Prometheus' default 5 s, 2 s with scrape's 1 s."""
    with pytest.raises(ConfigError, match="at least twice the refresh interval \\(5s\\)"):
        load("metrics: {vllm_requests_inflight: {smoothing: 9s}}")
    assert (
        _smoothing(_metric("metrics: {vllm_requests_inflight: {smoothing: 10s}}", "vllm_requests_inflight"))
        == 10
    )
    scrape = "source: scrape\nscrape: {targets: ['http://10.0.0.5:8000/metrics']}\n"
    assert (
        _smoothing(
            _metric(scrape + "metrics: {vllm_requests_inflight: {smoothing: 2s}}", "vllm_requests_inflight")
        )
        == 2
    )
    with pytest.raises(ConfigError, match="at least twice the refresh interval \\(1s\\)"):
        load(scrape + "metrics: {vllm_requests_inflight: {smoothing: 1500ms}}")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        pytest.param(
            "vllm_requests_inflight: {smoothing: 9s}",
            r"^config key 'metrics\.vllm_requests_inflight\.smoothing' "
            r"value 9s must be 0s \(off\) or at least "
            r"twice the refresh interval \(5s\)",
            id="too short",
        ),
        pytest.param(
            "vllm_requests_inflight: {smoothing: -30s}",
            r"^config key 'metrics\.vllm_requests_inflight\.smoothing' value '-30s' must be a duration",
            id="negative string",
        ),
        pytest.param(
            "vllm_requests_inflight: {smoothing: -5}",
            r"^config key 'metrics\.vllm_requests_inflight\.smoothing' "
            r"value -5 must be a duration of 0s \(off\) or more",
            id="negative number",
        ),
        pytest.param(
            "vllm_requests_inflight: {smoothing: soon}",
            r"^config key 'metrics\.vllm_requests_inflight\.smoothing' "
            r"value 'soon' must be a duration such as '30s'",
            id="not a duration",
        ),
        pytest.param(
            "vllm_requests_inflight: {smoothing: true}",
            r"^config key 'metrics\.vllm_requests_inflight\.smoothing' value True must be a duration",
            id="a boolean",
        ),
        pytest.param(
            "vllm_tpot_seconds: {smoothing: 30s}",
            r"^config key 'metrics\.vllm_tpot_seconds\.smoothing' value 30s applies only to gauge metrics .*"
            r"a histogram statistic or the forecast already averages over its 'window'",
            id="histogram mean",
        ),
        pytest.param(
            "vllm_ttft_seconds: {statistic: quantile, smoothing: 1m}",
            r"^config key 'metrics\.vllm_ttft_seconds\.smoothing' value 60s applies only to gauge metrics",
            id="histogram quantile",
        ),
        pytest.param(
            "vllm_request_rate_forecast: {horizon: 75s, smoothing: 30s}",
            r"^config key 'metrics\.vllm_request_rate_forecast\.smoothing' "
            r"value 30s applies only to gauge metrics",
            id="forecast",
        ),
        pytest.param(
            "queue_depth: {query: 'sum(q{<<.LabelMatchers>>})', smoothing: 30s}",
            r"^config key 'metrics\.queue_depth\.smoothing' "
            r"value 30s applies only to built-in gauge metrics; "
            r"for user PromQL write the mean into 'query', e\.g\. sum\(avg_over_time\(",
            id="user PromQL",
        ),
    ],
)
def test_errors_name_the_key_the_value_and_what_is_valid(entry: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(f"metrics: {{{entry}}}")


def test_a_misspelt_key_is_suggested() -> None:
    with pytest.raises(ConfigError, match="did you mean 'smoothing'"):
        load("metrics: {vllm_requests_inflight: {smoothin: 30s}}")


def test_other_durations_still_refuse_zero() -> None:
    """Only `smoothing` reads 0 as "off": a zero window or max_age is still an impossible value."""
    with pytest.raises(
        ConfigError, match=r"'metrics\.vllm_tpot_seconds\.window' value '0s' must be a positive duration"
    ):
        load("metrics: {vllm_tpot_seconds: {window: 0s}}")
    with pytest.raises(ConfigError, match=r"'scrape\.interval' value 0 must be a positive duration"):
        load("scrape: {interval: 0}")
