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
        pytest.param(
            "policies: [{name: a, metric: vllm_magic}]",
            "policy key 'policies[0].metric' value 'vllm_magic' must be one of ['vllm_requests_inflight'",
            id="unknown metric",
        ),
        pytest.param(
            "policies: [{name: a, metrc: x}]",
            "policy key 'policies[0].metrc' is unknown; did you mean 'metric'? valid keys here:",
            id="unknown key",
        ),
        pytest.param(
            "polices: []", "policy key 'polices' is unknown; did you mean 'policies'?", id="unknown top key"
        ),
        pytest.param(
            "policies: []", "policy key 'policies' value [] must be a non-empty list", id="no policies"
        ),
        pytest.param(
            "policies: [{name: a, target: many}]",
            "policy key 'policies[0].target' value 'many' must be a number > 0",
            id="bad target",
        ),
        pytest.param(
            "policies: [{name: a, target_type: Utilization}]",
            "'policies[0].target_type' value 'Utilization' must be one of",
            id="bad target type",
        ),
        pytest.param(
            "policies: [{name: a, min_replicas: 0}]",
            "min_replicas 0 needs the durable 'queue_depth' metric",
            id="zero without a queue",
        ),
        pytest.param(
            "policies: [{name: a, behavior: {scaleDown: {stabilizationWindowSeconds: 7200}}}]",
            "stabilizationWindowSeconds 7200 must be between 0 and 3600",
            id="behavior beyond the API's limit",
        ),
        pytest.param(
            "policies: [{name: a, behavior: {scaleUp: {policies: "
            "[{type: Pod, value: 1, periodSeconds: 15}]}}}]",
            "'policies[0].behavior.scaleUp.policies[0].type' value 'Pod' must be one of ['Pods', 'Percent']",
            id="bad policy type",
        ),
        pytest.param(
            "policies: [{name: a, metric: vllm_saturation, target_type: Value}]",
            "needs saturation.capacity",
            id="saturation without capacity",
        ),
        pytest.param(
            "policies: [{name: a}, {name: a}]", "policy key 'policies' names policy 'a' twice", id="duplicate"
        ),
        pytest.param(
            "policies: [{name: a, pipeline: kafka}]",
            "'policies[0].pipeline' value 'kafka' must be one of ['scrape', 'prometheus'] or {interval, lag}",
            id="bad pipeline",
        ),
        pytest.param("policies: [{name: a\n", "unable to read policy file", id="not YAML"),
    ],
)
def test_a_bad_policy_file_is_a_one_line_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(PolicyFileError) as raised:
        _load(tmp_path, text)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value) and "policies.yaml" in str(raised.value)


def test_the_anticipating_policy_with_its_guard(tmp_path: Path) -> None:
    """The forecast's horizon defaults to one sync period
    plus one cold start; the guard is a second metric."""
    path = tmp_path / "policies.yaml"
    path.write_text(
        "policies:\n"
        "  - {name: anticipate, metric: vllm_request_rate_forecast, target: 1.0, cold_start: 90,\n"
        "     guard: {metric: vllm_requests_inflight, target: 16}}\n"
        "  - {name: explicit, metric: vllm_request_rate_forecast, "
        "target: 1.0, forecast: {horizon: 30, window: 20}}\n",
        encoding="utf-8",
    )
    (anticipate, explicit), _ = load_policies(path, Policy("base"))
    assert anticipate.forecast == Forecast(horizon=105.0)
    assert anticipate.guard == Guard("vllm_requests_inflight", "AverageValue", 16.0)
    assert explicit.forecast == Forecast(horizon=30.0, window=20.0) and explicit.guard is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "policies: [{name: a, tolerance: -1}]",
            "'policies[0].tolerance' value -1 must be a number >= 0",
            id="negative tolerance",
        ),
        pytest.param(
            "defaults: {tolerance: .nan}\npolicies: [{name: a}]",
            "'defaults.tolerance' value nan must be a number >= 0",
            id="tolerance not a number",
        ),
        pytest.param(
            "policies: [{name: a, target: .inf}]",
            "'policies[0].target' value inf must be a number > 0",
            id="endless target",
        ),
        pytest.param(
            "policies: [{name: a, target: -2}]",
            "'policies[0].target' value -2 must be a number > 0",
            id="negative target",
        ),
        pytest.param(
            "policies: [{name: a, min_replicas: -1}]",
            "'policies[0].min_replicas' value -1 must be an integer >= 0",
            id="negative min replicas",
        ),
        pytest.param(
            "policies: [{name: a, max_replicas: 0}]",
            "'policies[0].max_replicas' value 0 must be an integer > 0",
            id="no replicas at most",
        ),
        pytest.param(
            "policies: [{name: a, sync_period: 0}]",
            "'policies[0].sync_period' value 0 must be a positive duration",
            id="no sync period",
        ),
        pytest.param(
            "policies: [{name: a, cold_start: -5}]",
            "'policies[0].cold_start' value -5 must be a duration of 0s (off) or more",
            id="negative cold start",
        ),
        pytest.param(
            "policies: [{name: a, cold_start: 1e3s}]",
            "'policies[0].cold_start' value '1e3s' must be a duration such as '30s', '2m' or 15",
            id="duration outside the grammar",
        ),
        pytest.param(
            "policies: [{name: a, downscale_stabilization: -1s}]",
            "'policies[0].downscale_stabilization' value '-1s' must be a duration",
            id="negative stabilization",
        ),
        pytest.param(
            "policies: [{name: a, smoothing: -30}]",
            "'policies[0].smoothing' value -30 must be a duration of 0s (off) or more",
            id="negative smoothing",
        ),
        pytest.param(
            "policies: [{name: a, pipeline: {interval: 0}}]",
            "'policies[0].pipeline.interval' value 0 must be a positive duration",
            id="no refresh interval",
        ),
        pytest.param(
            "policies: [{name: a, pipeline: {lag: -1}}]",
            "'policies[0].pipeline.lag' value -1 must be a duration of 0s (off) or more",
            id="negative lag",
        ),
        pytest.param(
            "policies: [{name: a, metric: vllm_saturation, saturation: {capacity: 0}}]",
            "'policies[0].saturation.capacity' value 0 must be a number > 0",
            id="no capacity",
        ),
        pytest.param(
            "policies: [{name: a, metric: vllm_saturation, saturation: {capacity: 8, kv_target: 1.5}}]",
            "'policies[0].saturation.kv_target' value 1.5 must be a number > 0 and <= 1",
            id="kv target above one",
        ),
        pytest.param(
            "policies: [{name: a, metric: vllm_request_rate_forecast, forecast: {horizon: 0}}]",
            "'policies[0].forecast.horizon' value 0 must be a positive duration",
            id="no horizon",
        ),
        pytest.param(
            "policies: [{name: a, guard: {metric: vllm_requests_inflight, target: -1}}]",
            "'policies[0].guard.target' value -1 must be a number > 0",
            id="negative guard target",
        ),
        pytest.param(
            "policies: [{name: a, guard: {target: 3}}]",
            "'policies[0].guard.metric' is required",
            id="guard without a metric",
        ),
        pytest.param(
            "policies: [{name: a, behavior: {scaleUp: {tolerance: -0.5}}}]",
            "'policies[0].behavior.scaleUp.tolerance' value -0.5 must be a number >= 0",
            id="negative behavior tolerance",
        ),
        pytest.param(
            "policies: [{name: a, behavior: {scaleUp: {policies: "
            "[{type: Pods, value: 0, periodSeconds: 15}]}}}]",
            "'policies[0].behavior.scaleUp.policies[0].value' value 0 must be an integer > 0",
            id="a policy of no pods",
        ),
        pytest.param(
            "policies: [{name: a, behavior: {scaleDown: {stabilizationWindowSeconds: -1}}}]",
            "stabilizationWindowSeconds' value -1 must be an integer >= 0",
            id="negative window",
        ),
        pytest.param(
            "policies: [{name: ''}]",
            "'policies[0].name' value '' must be a non-empty string",
            id="empty name",
        ),
        pytest.param("policies: [{target: 1}]", "'policies[0].name' is required", id="no name"),
        pytest.param(
            "defaults: {name: x}\npolicies: [{name: a}]",
            "'defaults.name' is not allowed",
            id="a name in the defaults",
        ),
        pytest.param(
            "baselines: yes please\npolicies: [{name: a}]",
            "'baselines' value 'yes please' must be true or false",
            id="baselines not a boolean",
        ),
    ],
)
def test_an_impossible_value_is_refused_where_it_is_written(tmp_path: Path, text: str, message: str) -> None:
    """Values no HPA or cluster could have (`tolerance: -1` was once accepted) fail at the key path."""
    with pytest.raises(PolicyFileError) as raised:
        _load(tmp_path, text)
    assert message in str(raised.value)
    assert str(raised.value).startswith(f"policy file {tmp_path / 'policies.yaml'}: ")


def test_durations_take_the_one_grammar_or_plain_seconds(tmp_path: Path) -> None:
    """`90s`, `2m`, `500ms` and a bare number of seconds, as everywhere else (`adapter.config.strict`)."""
    (policy,), _ = _load(
        tmp_path,
        "policies:\n"
        "  - {name: a, metric: vllm_request_rate_forecast, cold_start: 90s, sync_period: 15,\n"
        "     downscale_stabilization: 2m, smoothing: 500ms, pipeline: {interval: 15s, lag: 0},\n"
        "     forecast: {horizon: 105, window: 1m}}\n",
    )
    assert (policy.cold_start, policy.sync_period, policy.downscale_stabilization) == (90.0, 15.0, 120.0)
    assert policy.smoothing == 0.5 and policy.pipeline.interval == 15.0 and policy.pipeline.lag == 0.0
    assert policy.forecast == Forecast(horizon=105.0, window=60.0)
