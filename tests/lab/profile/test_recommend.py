"""Targets read off the curves at 85 % of the knee, and a saturation config the adapter accepts."""

from __future__ import annotations

import pytest

from adapter.config import load
from lab.profile.knee import find_knee
from lab.profile.recommend import HEADROOM, config_snippet, recommend, saturation_parameters
from lab.profile.schema import Knee
from tests.lab.profile.builders import step

STEPS = [
    step(2.0, running=2.0, waiting=0.0, kv=0.2),
    step(4.0, running=4.0, waiting=0.0, kv=0.4),
    step(6.0, running=6.0, waiting=0.4, kv=0.5),
    step(8.0, running=8.0, waiting=2.0, kv=0.7),
    step(9.0, running=8.0, waiting=30.0, kv=0.75, stable=False),
]


def test_each_target_is_the_metrics_value_at_85_percent_of_the_knee() -> None:
    """The knee is 8 req/s; at 6.8 req/s the curves give 6.8 + 0.4 + 0.192 ... interpolated."""
    knee = find_knee(STEPS, 0.9)
    assert knee is not None and knee.rate == 8.0
    targets, parameters = recommend(STEPS, knee, knee_waiting=2.0)
    at = HEADROOM * 8.0  # 6.8 req/s: 40 % of the way from the 6 to the 8 req/s step
    inflight = 6.4 + 0.4 * (10.0 - 6.4)
    assert targets["vllm_requests_inflight"].type == "AverageValue"
    assert targets["vllm_requests_inflight"].value == pytest.approx(round(inflight, 1))
    assert targets["vllm_kv_cache_usage"].value == pytest.approx(round(0.5 + 0.4 * 0.2, 2))
    assert targets["vllm_kv_cache_usage"].type == "Value"
    assert targets["vllm_requests_waiting"].value == 2.0
    assert parameters == {"capacity": 10.0, "queue_target": 2.0, "kv_target": 0.7}
    waiting = 0.4 + 0.4 * 1.6
    expected = max(inflight / 10.0, (0.5 + 0.4 * 0.2) / 0.7, waiting / 2.0)
    assert targets["vllm_saturation"].value == pytest.approx(round(expected, 2))
    assert f"{at:.3g} of 8 req/s" in targets["vllm_requests_inflight"].reasoning
    assert all(t.reasoning for t in targets.values())


def test_a_cache_full_at_half_the_knee_is_called_useless() -> None:
    """When KV usage is already high at half the knee (the KV-bound regime), the reasoning says so."""
    steps = [step(2.0, kv=0.85), step(4.0, kv=0.95), step(5.0, held=False)]
    knee = find_knee(steps, 0.9)
    assert knee is not None
    targets, _ = recommend(steps, knee, 0.0)
    assert "cannot tell load levels apart" in targets["vllm_kv_cache_usage"].reasoning


def test_queue_target_is_at_least_one_request_and_an_empty_cache_has_no_kv_term() -> None:
    knee = Knee(rate=3.0, concurrency=4.04, kv_usage=0.001, ttft_seconds=0.1, tpot_seconds=0.01)
    assert saturation_parameters(knee, 0.2) == {"capacity": 4.0, "queue_target": 1.0}


def test_the_snippet_is_a_configuration_the_adapter_serves() -> None:
    """The YAML uses the adapter's own keys: loading it serves `vllm_saturation` with those knees."""
    text = config_snippet({"capacity": 12.5, "kv_target": 0.7, "queue_target": 2.0})
    assert (
        text == "metrics:\n  vllm_saturation:\n    capacity: 12.5\n    kv_target: 0.7\n    queue_target: 2\n"
    )
    config = load(text)
    assert config.metrics["vllm_saturation"].capacity == 12.5
    assert "vllm_saturation" in {metric.name for metric in config.catalogue()}
