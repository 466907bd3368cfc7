"""`metrics.vllm_saturation.{capacity, kv_target, queue_target}` (adapter/config/metrics.py).

The metric exists only once a capacity is configured: a knee belongs to one model on one GPU, so
there is no default to fall back on. Every parameter is checked at start-up with the key's path.
"""

from __future__ import annotations

import pytest

from adapter.config import load
from adapter.errors import ConfigError
from adapter.vocabulary import catalogue
from adapter.vocabulary.catalogue import SaturationSpec


def test_not_served_until_configured() -> None:
    """Without configuration the catalogue has no vllm_saturation (discovery omits it, a request is 404)."""
    assert catalogue.SATURATION not in {m.name for m in load("").catalogue()}


def test_the_profile_snippet_configures_it() -> None:
    """The three parameters become the metric's spec; KV is read because its term is in."""
    config = load("metrics: {vllm_saturation: {capacity: 48, kv_target: 0.9, queue_target: 4}}")
    (metric,) = [m for m in config.catalogue() if m.name == catalogue.SATURATION]
    assert metric == catalogue.saturation(48.0, 0.9, 4.0)
    assert isinstance(metric.spec, SaturationSpec)
    assert metric.unit == "ratio"
    assert "max(inflight / capacity, KV usage / kv_target, waiting / queue_target)" in metric.help


def test_capacity_alone_reads_no_kv_gauge() -> None:
    spec = load("metrics: {vllm_saturation: {capacity: 32}}").catalogue()[-1].spec
    assert isinstance(spec, SaturationSpec)
    assert (spec.capacity, spec.kv_target, spec.queue_target) == (32.0, None, None)
    assert all("kv_cache" not in name for family in spec.families for name in family)


def test_a_new_name_with_a_capacity_is_another_saturation_metric() -> None:
    """One knee per model: a fleet of two models names a saturation metric per model."""
    config = load("metrics: {saturation_llama_70b: {capacity: 24, kv_target: 0.85}}")
    metric = config.catalogue()[-1]
    assert metric == catalogue.saturation(24.0, 0.85, name="saturation_llama_70b")


def test_other_settings_still_apply() -> None:
    metric = load("metrics: {vllm_saturation: {capacity: 8, max_age: 30s, namespaced: false}}").catalogue()[
        -1
    ]
    assert (metric.max_age_seconds, metric.namespaced) == (30.0, False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "metrics: {vllm_saturation: {}}",
            "config key 'metrics.vllm_saturation.capacity' is required",
            id="vllm_saturation without capacity",
        ),
        pytest.param(
            "metrics: {vllm_saturation: {kv_target: 0.9}}",
            "config key 'metrics.vllm_saturation.capacity' is required",
            id="a target without capacity",
        ),
        pytest.param(
            "metrics: {my_saturation: {queue_target: 4}}",
            "config key 'metrics.my_saturation.capacity' is required",
            id="a new metric with a target but no capacity",
        ),
        pytest.param(
            "metrics: {vllm_saturation: {capacity: 0}}",
            "config key 'metrics.vllm_saturation.capacity' value 0.0 must be a positive number",
            id="zero capacity",
        ),
        pytest.param(
            "metrics: {vllm_saturation: {capacity: -4}}",
            "config key 'metrics.vllm_saturation.capacity' value -4.0 must be a positive number",
            id="negative capacity",
        ),
        pytest.param(
            "metrics: {vllm_saturation: {capacity: .inf}}",
            "config key 'metrics.vllm_saturation.capacity' value inf must be a positive number",
            id="infinite capacity",
        ),
        pytest.param(
            "metrics: {vllm_saturation: {capacity: 8, queue_target: 0}}",
            "config key 'metrics.vllm_saturation.queue_target' value 0.0 must be a positive number",
            id="zero queue target",
        ),
        pytest.param(
            "metrics: {vllm_saturation: {capacity: 8, kv_target: 1.2}}",
            "config key 'metrics.vllm_saturation.kv_target' value 1.2 must be at most 1",
            id="kv target above full",
        ),
        pytest.param(
            "metrics: {vllm_saturation: {capacity: many}}",
            "config key 'metrics.vllm_saturation.capacity' value 'many' must be a number",
            id="not a number",
        ),
        pytest.param(
            "metrics: {vllm_saturation: {capacity: 8, query: 'sum(x{<<.LabelMatchers>>})'}}",
            "config key 'metrics.vllm_saturation.query' cannot be combined with 'capacity'",
            id="a query too",
        ),
        pytest.param(
            "metrics: {vllm_kv_cache_usage: {kv_target: 0.9}}",
            "config key 'metrics.vllm_kv_cache_usage' sets capacity/kv_target/queue_target",
            id="knee parameters on another built-in",
        ),
        pytest.param(
            "metrics: {q: {query: 'sum(x{<<.LabelMatchers>>})', capacity: 8}}",
            "config key 'metrics.q' sets capacity/kv_target/queue_target",
            id="knee parameters on a user PromQL metric",
        ),
        pytest.param(
            "metrics: {vllm_saturation: {capacity: 8, window: 2m}}",
            "apply only to histogram metrics",
            id="a window",
        ),
    ],
)
def test_bad_settings_name_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(text)
    assert message in str(caught.value)
