"""The HPA spec (`lab.hpa.spec`): quantities, defaults and the API server's validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.hpa import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Behavior,
    HPASpec,
    OtherMetric,
    ScalingPolicy,
    ScalingRules,
    admit,
    cluster_features,
    milli_value,
    with_defaults,
)
from tests.lab.hpa.harness import average


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        pytest.param("730m", 730, id="milli suffix"),
        pytest.param("24", 24000, id="plain integer"),
        pytest.param("1.5", 1500, id="decimal"),
        pytest.param("2k", 2_000_000, id="kilo"),
        pytest.param("1Ki", 1_024_000, id="binary suffix"),
        pytest.param(0.8, 800, id="float"),
        pytest.param("250000u", 250, id="micro"),
        pytest.param("1P", 10**18, id="peta"),
        pytest.param("0.005E", 5 * 10**18, id="exa"),
        pytest.param("2Pi", 2 * 2**50 * 1000, id="pebi"),
        pytest.param("0.001Ei", 2**60, id="exbi"),
        pytest.param("1E3", 1_000_000, id="capital E with digits is an exponent, not exa"),
        pytest.param("5e-1", 500, id="negative exponent"),
        pytest.param("+.5", 500, id="sign and bare fraction"),
        pytest.param("0", 0, id="zero"),
    ],
)
def test_milli_value(text: str | float, milli: int) -> None:
    """Targets are read with resource.Quantity.MilliValue(), through the server's one quantity parser."""
    assert milli_value(text) == milli


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        pytest.param("0.0001", 1, id="a sub-milli fraction rounds up to one milli-unit"),
        pytest.param("1.0001", 1001, id="any fraction of a milli-unit rounds up"),
        pytest.param("1.5m", 2, id="half a milli-unit rounds up, not to even"),
        pytest.param("999999n", 1, id="nano below a milli-unit"),
        pytest.param("1000001n", 2, id="nano just above a milli-unit"),
        pytest.param("-1.5m", -2, id="a negative fraction rounds away from zero"),
        pytest.param(
            "1.00000000000000000000000000000001", 1001, id="exact beyond float and decimal precision"
        ),
        pytest.param("1e-999999999", 1, id="a tiny exponent still rounds up"),
        pytest.param("9223372036854775807m", 2**63 - 1, id="the largest int64"),
        pytest.param("-9223372036854775808m", -(2**63), id="the smallest int64"),
    ],
)
def test_milli_value_rounds_up_as_kubernetes(text: str, milli: int) -> None:
    """`MilliValue()` rounds any fraction of a milli-unit up (away from zero, `int64Amount.AsScaledInt64`),
    exactly, never through a float."""
    assert milli_value(text) == milli


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-9e15, max_value=9e15))
def test_a_float_reads_as_its_decimal_text_does(value: float) -> None:
    """A float (what the backtest reads at every sync) is read by its digits, not through the decimal
    parser: the same milli-units as its `repr` parsed as a quantity, rounding included."""
    assert milli_value(value) == milli_value(repr(value))


@pytest.mark.parametrize("value", [0.0001, -0.0001, 1.0005, -2.5, 0.999, 1e-05, 123456789.123456, -0.0])
def test_a_float_rounds_as_its_text(value: float) -> None:
    assert milli_value(value) == milli_value(repr(value))


@pytest.mark.parametrize("text", ["lots", "nan", "inf", "1_000", "1.5e3k", "1 k", "1Ki3", "", "m", "1.2.3"])
def test_milli_value_rejects_garbage(text: str) -> None:
    """A target that is not a Kubernetes quantity is a spec error, named with an example."""
    with pytest.raises(ValueError, match=f"quantity '{text}' must be a number with an optional SI suffix"):
        milli_value(text)


@pytest.mark.parametrize("text", ["1E", "1Ei", "9Pi", "9223372036854775808m", "1e999999999", "-1E"])
def test_milli_value_refuses_what_int64_cannot_hold(text: str) -> None:
    """Beyond 2^63-1 milli-units (about 9.2P) the controller's int64 would overflow: the model refuses."""
    with pytest.raises(ValueError, match="beyond the int64 of milli-units"):
        milli_value(text)


def test_default_behavior_matches_the_documented_defaults() -> None:
    """Unset fields of `behavior` take the documented defaults: scaleUp no window, Pods 4 and Percent 100 per
    15 s, Max; scaleDown Percent 100 per 15 s, window from the controller flag ("Default Behavior";
    defaults.go)."""
    completed = with_defaults(Behavior(scale_down=ScalingRules(stabilization_window_seconds=60)))
    assert completed.scale_up == DEFAULT_SCALE_UP
    assert completed.scale_up.policies == (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15))
    assert completed.scale_down == ScalingRules(60, "Max", DEFAULT_SCALE_DOWN.policies)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"max_replicas": 3, "metrics": ()}, "at least one metric", id="no metrics"),
        pytest.param(
            {"max_replicas": 2, "min_replicas": 3, "metrics": (average(),)},
            "minReplicas <= maxReplicas",
            id="min above max",
        ),
        pytest.param(
            {"max_replicas": 0, "min_replicas": 0, "metrics": (average(),)}, "maxReplicas >= 1", id="max zero"
        ),
        pytest.param({"max_replicas": 3, "metrics": (average("0"),)}, "must be positive", id="zero target"),
        pytest.param(
            {
                "max_replicas": 3,
                "metrics": (average(),),
                "behavior": Behavior(scale_up=ScalingRules(policies=(ScalingPolicy("Pods", 1, 3600),))),
            },
            "periodSeconds <= 1800",
            id="policy period too long",
        ),
        pytest.param(
            {
                "max_replicas": 3,
                "metrics": (average(),),
                "behavior": Behavior(scale_down=ScalingRules(policies=())),
            },
            "must specify at least one policy",
            id="empty policy list",
        ),
        pytest.param(
            {"max_replicas": 3, "metrics": (average(),), "behavior": Behavior(scale_down=ScalingRules(3601))},
            "between 0 and 3600",
            id="stabilization window too long",
        ),
        pytest.param(
            {
                "max_replicas": 3,
                "metrics": (average(),),
                "behavior": Behavior(scale_up=ScalingRules(tolerance=-0.1)),
            },
            "greater than or equal to 0",
            id="negative tolerance",
        ),
        pytest.param(
            {
                "max_replicas": 3,
                "min_replicas": 0,
                "metrics": (),
                "other_metrics": (OtherMetric("Resource", "cpu"),),
            },
            "at least one Object or External metric to support scaling to zero",
            id="minReplicas 0 with only a Resource metric",
        ),
    ],
)
def test_spec_validation(kwargs: dict[str, object], message: str) -> None:
    """Specs the API server would reject are rejected with the rule they break (validation.go)."""
    with pytest.raises(ValueError, match=message):
        HPASpec(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("metrics", "others"),
    [
        pytest.param((average(),), (), id="an External metric"),
        pytest.param((), (OtherMetric("Object", "queue_length"),), id="an Object metric"),
        pytest.param((average(),), (OtherMetric("Resource", "cpu"),), id="External beside a Resource metric"),
    ],
)
def test_min_replicas_zero_with_an_object_or_external_metric(
    metrics: tuple[object, ...], others: tuple[OtherMetric, ...]
) -> None:
    """minReplicas 0 is valid once one metric exists without pods (validateMetrics)."""
    spec = HPASpec(max_replicas=3, min_replicas=0, metrics=metrics, other_metrics=others)  # type: ignore[arg-type]
    assert spec.has_object_or_external


@pytest.mark.parametrize(
    ("version", "gate", "admitted"),
    [
        pytest.param("1.37", None, True, id="1.37 admits minReplicas 0 by default"),
        pytest.param("1.36", None, False, id="1.36 needs the alpha gate"),
        pytest.param("1.36", True, True, id="1.36 with the gate on"),
        pytest.param("1.37", False, False, id="1.37 with the gate turned off"),
    ],
)
def test_admit_minimum_zero_needs_the_api_servers_gate(
    version: str, gate: bool | None, admitted: bool
) -> None:
    """The API server lowers minReplicas' bound to 0 only with HPAScaleToZero on."""
    spec = HPASpec(max_replicas=3, min_replicas=0, metrics=(average(),))
    features = cluster_features(version, scale_to_zero=gate)
    if admitted:
        admit(spec, features)
    else:
        with pytest.raises(ValueError, match=f"HPAScaleToZero feature gate.*cluster is {version}"):
            admit(spec, features)


def test_admit_ignores_the_gate_when_minimum_is_positive() -> None:
    """minReplicas >= 1 is valid on every version."""
    admit(HPASpec(max_replicas=3, metrics=(average(),)), cluster_features("1.30"))


def test_other_metric_failure_reasons() -> None:
    """computeReplicasForMetric names the failed metric type in ScalingActive's reason."""
    reasons = [
        OtherMetric(t, "m").failure_reason for t in ("Resource", "ContainerResource", "Pods", "Object")
    ]
    assert reasons == [
        "FailedGetResourceMetric",
        "FailedGetContainerResourceMetric",
        "FailedGetPodsMetric",
        "FailedGetObjectMetric",
    ]
