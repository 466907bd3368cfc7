"""Policy files: read strictly into policies; every mistake names the file and the key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.backtest.policy import Forecast, Guard, Policy
from lab.backtest.policy_file import PolicyFileError, load_policies

BASE = Policy("base", max_replicas=8, cold_start=60.0)


def _load(tmp_path: Path, text: str) -> tuple[list[Policy], bool]:
    path = tmp_path / "policies.yaml"
    path.write_text(text, encoding="utf-8")
    return load_policies(path, BASE)


def test_a_policy_file_with_defaults_behavior_and_saturation(tmp_path: Path) -> None:
    policies, baselines = _load(
        tmp_path,
        """
defaults: {max_replicas: 12, cold_start: 90}
baselines: false
policies:
  - name: inflight-6
    metric: vllm_requests_inflight
    target: 6
    pipeline: prometheus
    behavior:
      scaleDown: {stabilizationWindowSeconds: 120, policies: [{type: Pods, value: 1, periodSeconds: 60}]}
  - name: sat
    metric: vllm_saturation
    target_type: Value
    target: 1
    saturation: {capacity: 20, kv_target: 0.9}
""",
    )
    assert baselines is False
    inflight, sat = policies
    assert (inflight.max_replicas, inflight.cold_start, inflight.pipeline.interval) == (12, 90.0, 15.0)
    assert inflight.behavior is not None and inflight.behavior.scale_down is not None
    assert inflight.behavior.scale_down.stabilization_window_seconds == 120
    assert sat.saturation is not None and (sat.saturation.capacity, sat.saturation.kv_target) == (20.0, 0.9)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("policies: [{name: a, metric: vllm_magic}]", "policies[0].metric 'vllm_magic' must be one of ['vllm_requests_inflight'", id="unknown metric"),
        pytest.param("policies: [{name: a, metrc: x}]", "policies[0] key 'metrc' is not known", id="unknown key"),
        pytest.param("polices: []", "key 'polices' is not known", id="unknown top key"),
        pytest.param("policies: []", "key 'policies' must be a non-empty list", id="no policies"),
        pytest.param("policies: [{name: a, target: many}]", "policies[0].target 'many' must be a number", id="bad target"),
        pytest.param("policies: [{name: a, target_type: Utilization}]", "target_type 'Utilization' must be one of", id="bad target type"),
        pytest.param("policies: [{name: a, min_replicas: 0}]", "min_replicas 0 needs the durable 'queue_depth' metric", id="zero without a queue"),
        pytest.param("policies: [{name: a, behavior: {scaleDown: {stabilizationWindowSeconds: 7200}}}]", "stabilizationWindowSeconds 7200 must be between 0 and 3600", id="behavior beyond the API's limit"),
        pytest.param("policies: [{name: a, behavior: {scaleUp: {policies: [{type: Pod, value: 1, periodSeconds: 15}]}}}]", "scaleUp.policies[0].type 'Pod' must be one of ['Pods', 'Percent']", id="bad policy type"),
        pytest.param("policies: [{name: a, metric: vllm_saturation, target_type: Value}]", "needs saturation.capacity", id="saturation without capacity"),
        pytest.param("policies: [{name: a}, {name: a}]", "names policy 'a' twice", id="duplicate"),
        pytest.param("policies: [{name: a, pipeline: kafka}]", "pipeline 'kafka' must be one of ['scrape', 'prometheus']", id="bad pipeline"),
        pytest.param("policies: [{name: a\n", "unable to read policy file", id="not YAML"),
    ],
)  # fmt: skip
def test_a_bad_policy_file_is_a_one_line_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(PolicyFileError) as raised:
        _load(tmp_path, text)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value) and "policies.yaml" in str(raised.value)


def test_the_anticipating_policy_with_its_guard(tmp_path: Path) -> None:
    """The forecast's horizon defaults to one sync period plus one cold start; the guard is a second metric."""
    path = tmp_path / "policies.yaml"
    path.write_text(
        "policies:\n"
        "  - {name: anticipate, metric: vllm_request_rate_forecast, target: 1.0, cold_start: 90,\n"
        "     guard: {metric: vllm_requests_inflight, target: 16}}\n"
        "  - {name: explicit, metric: vllm_request_rate_forecast, target: 1.0, forecast: {horizon: 30, window: 20}}\n",
        encoding="utf-8",
    )
    (anticipate, explicit), _ = load_policies(path, Policy("base"))
    assert anticipate.forecast == Forecast(horizon=105.0)
    assert anticipate.guard == Guard("vllm_requests_inflight", "AverageValue", 16.0)
    assert explicit.forecast == Forecast(horizon=30.0, window=20.0) and explicit.guard is None
