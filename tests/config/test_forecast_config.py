"""`metrics.vllm_request_rate_forecast.{horizon, window}` (adapter/config/metrics.py).

The forecast exists only once a horizon is configured: one HPA sync period plus one cold start is a
property of the cluster, never a default. Each key is checked at start-up with its path.
"""

from __future__ import annotations

import pytest

from adapter.config import load
from adapter.errors import ConfigError
from adapter.vocabulary import catalogue
from adapter.vocabulary.catalogue import HistogramSpec, Statistic


def test_not_served_until_configured() -> None:
    assert catalogue.FORECAST not in {m.name for m in load("").catalogue()}


def test_the_horizon_configures_it_with_a_one_minute_window() -> None:
    (metric,) = [
        m
        for m in load("metrics: {vllm_request_rate_forecast: {horizon: 75s}}").catalogue()
        if m.name == catalogue.FORECAST
    ]
    assert metric == catalogue.forecast(75.0)
    assert isinstance(metric.spec, HistogramSpec)
    assert metric.spec.statistic is Statistic.FORECAST
    assert (metric.spec.window_seconds, metric.spec.span_seconds) == (60.0, 120.0)
    # the trend per window carried over 75 s and half a window: (75 + 30) / 60
    assert metric.spec.trend_factor == pytest.approx(1.75)


def test_a_window_and_a_new_name() -> None:
    config = load("metrics: {forecast_llama: {horizon: 2m, window: 30s}}")
    (metric,) = [m for m in config.catalogue() if m.name == "forecast_llama"]
    assert metric == catalogue.forecast(120.0, 30.0, name="forecast_llama")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{vllm_request_rate_forecast: {window: 60s}}", "horizon' is required", id="no horizon"),
        pytest.param(
            "{vllm_request_rate_forecast: {horizon: 75s, window: 1s}}",
            "at least twice",
            id="window too short",
        ),
        pytest.param(
            "{vllm_request_rate_forecast: {horizon: 75s, query: up}}", "takes only horizon", id="with a query"
        ),
        pytest.param("{vllm_requests_inflight: {horizon: 75s}}", "applies only to", id="on another built-in"),
    ],
)
def test_errors_name_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(f"metrics: {text}")
