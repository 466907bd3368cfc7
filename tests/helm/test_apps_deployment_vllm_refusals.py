"""templates/apps-deployment-vllm.yaml refuses what would hide vLLM's metrics or break the chart's wiring.

Each case renders with the real `helm` binary, with the values schema (what `helm install` users see)
and without it (`--skip-schema-validation`), and must fail naming the key, the value and the reason.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.helm.conftest import ONE_MODEL, HelmResult, render_many


def _model(**overrides: Any) -> dict[str, Any]:
    values = copy.deepcopy(ONE_MODEL)
    values["models"][0].update(overrides)
    return values


#: case → (values, message): rules the schema cannot express, and flags refused by the template itself
REFUSALS: dict[str, tuple[dict[str, Any], str]] = {
    "disable-log-stats": (
        _model(extraArgs=["--enable-prefix-caching", "--disable-log-stats"]),
        'models[0].extraArgs[1] value "--disable-log-stats" is refused',
    ),
    "disable-log-stats with a value": (
        _model(extraArgs=["--enable-prefix-caching", "--disable-log-stats=true"]),
        'models[0].extraArgs[1] value "--disable-log-stats=true" is refused',
    ),
    "disable-log-stats with underscores": (
        _model(extraArgs=["--disable_log_stats"]),
        'models[0].extraArgs[0] value "--disable_log_stats" is refused',
    ),
    "disable-log-stats abbreviated": (
        _model(extraArgs=["--disable-log-stat"]),
        'models[0].extraArgs[0] value "--disable-log-stat" is refused',
    ),
    "a flag the chart manages": (
        _model(extraArgs=["--port=9000"]),
        "the chart sets --port from values",
    ),
    "a managed flag with underscores": (
        _model(extraArgs=["--served_model_name=other"]),
        "the chart sets --served-model-name from values",
    ),
    "several MIG slices": (
        _model(gpu={"resource": "nvidia.com/mig-3g.40gb", "count": 2}),
        "models[0].gpu.count value 2 must be 1 for the MIG resource nvidia.com/mig-3g.40gb",
    ),
    "GPUs also in resources": (
        _model(resources={"limits": {"nvidia.com/gpu": 2}}),
        'models[0].resources.limits value "nvidia.com/gpu" is refused: the chart sets it from gpu.count',
    ),
    "unknown pool": (
        _model(pool="gpu-x"),
        'models[0].pool value "gpu-x" must be one of [on-demand spot]',
    ),
    "pipeline parallelism not dividing the GPUs": (
        _model(gpu={"count": 4}, pipelineParallelSize=3),
        "models[0].pipelineParallelSize value 3 must divide gpu.count (4)",
    ),
    "pvc cache without a claim": (
        _model(modelCache={"type": "persistentVolumeClaim"}),
        "models[0].modelCache needs existingClaim or create: true",
    ),
}


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], HelmResult]:
    # Each case with the schema (what `helm install` users see: the schema must not pre-empt the message)
    # and without it (`--skip-schema-validation` must not let --disable-log-stats through either).
    tmp = tmp_path_factory.mktemp("refusals")
    cases = {key: values for key, (values, _) in REFUSALS.items()}
    with_schema = render_many(tmp / "schema", cases)
    without = render_many(tmp / "no-schema", cases, extra=("--skip-schema-validation",))
    return {
        **{(key, True): result for key, result in with_schema.items()},
        **{(key, False): result for key, result in without.items()},
    }


@pytest.mark.parametrize("schema", [pytest.param(True, id="schema"), pytest.param(False, id="no-schema")])
@pytest.mark.parametrize("case", [pytest.param(key, id=key) for key in REFUSALS])
def test_template_refuses_unsafe_model_naming_the_key(
    case: str, schema: bool, refusals: dict[tuple[str, bool], HelmResult]
) -> None:
    """Flags that would hide vLLM's metrics or break the chart's wiring, and inconsistent settings, fail the
    render with the key path, the offending value and the reason, whether or not the schema runs first."""
    result = refusals[case, schema]
    assert result.returncode != 0
    assert REFUSALS[case][1] in result.stderr, result.stderr
