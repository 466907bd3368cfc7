"""Configuration: strict loading with errors that name the key path, the bad value and what is valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.config import load, load_file, parse_duration
from adapter.errors import ConfigError
from adapter.vocabulary.catalogue import HistogramSpec, PromQLSpec, Statistic


def test_defaults_serve_every_builtin_metric() -> None:
    """An empty file is valid: Prometheus source on defaults, the six built-in vLLM metrics, the
    inference gateway's two and the decode pool's KV hand-overs."""
    config = load("")
    assert config.source == "prometheus"
    assert [m.name for m in config.catalogue()] == [
        "vllm_requests_waiting",
        "vllm_requests_running",
        "vllm_requests_inflight",
        "vllm_kv_cache_usage",
        "vllm_tpot_seconds",
        "vllm_ttft_seconds",
        "gateway_queue_size",
        "gateway_requests_running",
        "vllm_kv_fetch_requests",
    ]


def test_full_example_loads() -> None:
    """The documented example configuration loads with every kind of setting."""
    config = load_file(Path(__file__).parents[2] / "docs" / "config.example.yaml")
    names = {m.name for m in config.catalogue()}
    assert {"queue_depth", "dlq_depth"} <= names
    queue = next(m for m in config.catalogue() if m.name == "queue_depth")
    assert isinstance(queue.spec, PromQLSpec)
    assert queue.namespaced is False


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "sourc: prometheus",
            "config key 'sourc' is unknown; did you mean 'source'? valid keys here: [",
            id="unknown top-level key",
        ),
        pytest.param(
            "prometheus: {urll: x}",
            "config key 'prometheus.urll' is unknown",
            id="unknown nested key names its path",
        ),
        pytest.param(
            "source: prom",
            "config key 'source' value 'prom' must be one of ['prometheus', 'scrape']",
            id="bad enum",
        ),
        pytest.param(
            "prometheus: {timeout: fast}",
            "config key 'prometheus.timeout' value 'fast' must be a duration such as '30s'",
            id="bad duration",
        ),
        pytest.param(
            "prometheus: {timeout: -1}",
            "config key 'prometheus.timeout' value -1 must be a positive",
            id="negative",
        ),
        pytest.param(
            "server: {port: '80'}", "config key 'server.port' value '80' must be an integer", id="wrong type"
        ),
        pytest.param(
            "server: {port: 70000}", "'server.port' value 70000 must be between 1 and 65535", id="port range"
        ),
        pytest.param(
            "prometheus: {max_age: 2s, refresh_interval: 5s}",
            "config key 'prometheus.max_age' value 2s must be at least the refresh interval (5s)",
            id="max_age below refresh interval",
        ),
        pytest.param(
            "metrics: {vllm_kv_cache_usage: {max_age: 1s}}",
            "config key 'metrics.vllm_kv_cache_usage.max_age' "
            "value 1s must be at least the refresh interval (5s)",
            id="metric max_age below refresh interval",
        ),
        pytest.param(
            "metrics: {queue_depth: {namespaced: false}}",
            "config key 'metrics.queue_depth.query' is required for user metric 'queue_depth'",
            id="user metric without query",
        ),
        pytest.param(
            "metrics: {q: {query: 'sum(requests_total)'}}",
            "reads cumulative series ['requests_total'] without rate()",
            id="raw counter",
        ),
        pytest.param(
            "metrics: {q: {query: 'sum(x_bucket)'}}",
            "reads cumulative series ['x_bucket']",
            id="raw bucket",
        ),
        pytest.param(
            "metrics: {q: {query: 'sum(x_sum) / sum(x_count)'}}",
            "reads cumulative series ['x_sum', 'x_count']",
            id="raw sum and count",
        ),
        pytest.param(
            "metrics: {vllm_kv_cache_usage: {query: 'up'}}",
            "cannot replace built-in metric 'vllm_kv_cache_usage'",
            id="builtin query override",
        ),
        pytest.param(
            "metrics: {vllm_kv_cache_usage: {statistic: quantile}}",
            "apply only to histogram metrics",
            id="statistic on a gauge",
        ),
        pytest.param(
            "metrics: {vllm_tpot_seconds: {quantile: 1.5}}",
            "'metrics.vllm_tpot_seconds.quantile' value 1.5 must be between 0 and 1",
            id="quantile out of range",
        ),
        pytest.param(
            "metrics: {vllm_tpot_seconds: {statistic: median}}",
            "value 'median' must be one of ['mean', 'quantile']",
            id="unknown statistic",
        ),
        pytest.param(
            "metrics: {vllm_tpot_seconds: {window: 5s}}",
            "window' value 5s must be at least twice the refresh interval",
            id="window too short for a rate",
        ),
        pytest.param(
            "metrics: {Bad_Name: {query: 'up'}}",
            "'metrics.Bad_Name' is not a valid metric name",
            id="bad metric name",
        ),
        pytest.param(
            "metrics: {q: {query: 'up', on_empty: nothing}}",
            "config key 'metrics.q.on_empty' value 'nothing' must be a number or one of ['error']",
            id="bad on_empty",
        ),
        pytest.param(
            "prometheus: {url: 'prometheus:9090'}",
            "'prometheus.url' value 'prometheus:9090' must start with http:// or https://",
            id="url without scheme",
        ),
        pytest.param(
            "prometheus: {cert_file: /c.pem}",
            "'prometheus.cert_file' and 'prometheus.key_file' must be set together",
            id="client cert without key",
        ),
        pytest.param(
            "cache: {max_keys: 0}", "'cache.max_keys' value 0 must be at least 1", id="max_keys zero"
        ),
        pytest.param("- a\n- b", "must be a mapping at the top level", id="list at top level"),
        pytest.param("a: [", "unable to parse configuration YAML", id="broken YAML"),
        pytest.param(
            "prometheus: {basic_auth: {username: u}}",
            "'prometheus.basic_auth.password_file' is required",
            id="required nested key",
        ),
    ],
)
def test_config_errors(text: str, message: str) -> None:
    """Each invalid configuration fails at start-up with a message naming key, value and rule."""
    with pytest.raises(ConfigError) as caught:
        load(text)
    assert message in str(caught.value)


def test_overrides_win_over_the_file() -> None:
    """Flags override file values and are validated the same way."""
    config = load(
        "prometheus: {url: 'http://a:9090'}", {"prometheus.url": "http://b:9090", "server.port": 7443}
    )
    assert config.prometheus.url == "http://b:9090"
    assert config.server.port == 7443
    with pytest.raises(ConfigError, match="'source' value 'x'"):
        load("", {"source": "x"})


def test_histogram_overrides_apply() -> None:
    """statistic, quantile and window override a built-in histogram metric."""
    config = load("metrics: {vllm_tpot_seconds: {statistic: quantile, quantile: 0.95, window: 5m}}")
    tpot = next(m for m in config.catalogue() if m.name == "vllm_tpot_seconds")
    assert isinstance(tpot.spec, HistogramSpec)
    assert (tpot.spec.statistic, tpot.spec.quantile, tpot.spec.window_seconds) == (
        Statistic.QUANTILE,
        0.95,
        300.0,
    )


def test_user_metric_fails_closed_on_empty_by_default() -> None:
    """A user metric without presence cannot tell empty from broken, so on_empty defaults to an error."""
    config = load("metrics: {dlq_depth: {query: 'max(sqs_visible{queue_name=\"x\", <<.LabelMatchers>>})'}}")
    dlq = next(m for m in config.catalogue() if m.name == "dlq_depth")
    assert dlq.on_empty is None
    relaxed = load("metrics: {dlq_depth: {query: 'max(sqs_visible)', namespaced: false, on_empty: 0}}")
    assert next(m for m in relaxed.catalogue() if m.name == "dlq_depth").on_empty == 0.0


def test_rate_wrapped_counters_are_accepted() -> None:
    """rate(), increase() and histogram_quantile(rate(...)) make cumulative series valid."""
    load(
        "metrics:\n"
        "  a: {query: 'sum(rate(x_total{<<.LabelMatchers>>}[2m]))'}\n"
        "  b: {query: 'histogram_quantile(0.9, sum by (le) (rate(x_bucket{<<.LabelMatchers>>}[5m])))'}\n"
        "  c: {query: 'sum(increase(x_count[5m])) / sum(increase(y_sum[5m]))', namespaced: false}\n"
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("250ms", 0.25), ("30s", 30.0), ("2m", 120.0), ("1h", 3600.0), (15, 15.0), (1.5, 1.5)],
)
def test_durations(text: str | float, seconds: float) -> None:
    """Durations accept Prometheus-style units or plain seconds."""
    assert parse_duration(text, "k") == seconds


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    """A configuration file that cannot be read is a ConfigError naming it."""
    with pytest.raises(ConfigError, match=r"unable to read configuration file '.*nope\.yaml'"):
        load_file(tmp_path / "nope.yaml")
