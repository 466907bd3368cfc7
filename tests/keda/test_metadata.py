"""scalerMetadata and the ScaledObject's namespace, read as a question to the provider."""

from __future__ import annotations

import pytest

from adapter.errors import InvalidMetadata
from adapter.keda.metadata import ScalerQuery, parse
from adapter.vocabulary import selectors


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        pytest.param(
            {"metric": "queue_depth", "target": "50"},
            ScalerQuery("queue_depth", "prod", selectors.parse(""), 50.0, 0.0),
            id="required keys only: every pod, activation 0",
        ),
        pytest.param(
            {
                "metric": "vllm_requests_inflight",
                "target": "12",
                "activationTarget": "0.5",
                "labelSelector": "model_name in (llama,qwen),app.kubernetes.io/part-of=x",
            },
            ScalerQuery(
                "vllm_requests_inflight",
                "prod",
                selectors.parse("app.kubernetes.io/part-of=x,model_name in (qwen,llama)"),
                12.0,
                0.5,
            ),
            id="all keys; the selector parsed by the HTTP API's parser",
        ),
        pytest.param(
            {"metric": "vllm_kv_cache_usage", "target": "800m"},
            ScalerQuery("vllm_kv_cache_usage", "prod", selectors.parse(""), 0.8, 0.0),
            id="target as a Kubernetes quantity",
        ),
        pytest.param(
            {
                "metric": "queue_depth",
                "target": "1e2",
                "scalerAddress": "a:1",
                "enableTLS": "true",
                "unsafeSsl": "false",
            },
            ScalerQuery("queue_depth", "prod", selectors.parse(""), 100.0, 0.0),
            id="KEDA's own connection keys are ignored",
        ),
        # As kedacore/keda pkg/scalers/external_scaler.go forwards them: the resolved value under the
        # `...FromEnv` key itself.
        pytest.param(
            {
                "metricFromEnv": "queue_depth",
                "targetFromEnv": "25",
                "labelSelectorFromEnv": "queue=a",
                "activationTargetFromEnv": "2",
            },
            ScalerQuery("queue_depth", "prod", selectors.parse("queue=a"), 25.0, 2.0),
            id="every key resolved from the workload's environment",
        ),
        pytest.param(
            {"metric": "queue_depth", "target": "1m"},
            ScalerQuery("queue_depth", "prod", selectors.parse(""), 0.001, 0.0),
            id="the smallest target KEDA keeps above 0: 1m",
        ),
    ],
)
def test_valid_metadata(metadata: dict[str, str], expected: ScalerQuery) -> None:
    """Valid metadata becomes the query the HTTP API would ask for the same metric, namespace and selector."""
    assert parse("prod", metadata) == expected


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        pytest.param(
            {"target": "1"},
            "scalerMetadata key 'metric' (or 'metricFromEnv') is required",
            id="metric missing",
        ),
        pytest.param(
            {"metric": " ", "target": "1"},
            "scalerMetadata key 'metric' (or 'metricFromEnv') is required",
            id="metric blank",
        ),
        pytest.param(
            {"metric": "m"},
            "scalerMetadata key 'target' (or 'targetFromEnv') is required: a number >= 0.001",
            id="target missing",
        ),
        pytest.param(
            {"metric": "m", "target": "0"},
            "key 'target' value '0' must be a number >= 0.001",
            id="target zero",
        ),
        pytest.param(
            {"metric": "m", "target": "-3"},
            "key 'target' value '-3' must be a number >= 0.001",
            id="target negative",
        ),
        pytest.param(
            {"metric": "m", "target": "ten"},
            "key 'target' value 'ten' must be a number >= 0.001",
            id="target not a number",
        ),
        pytest.param(
            {"metric": "m", "target": "0.0004"},
            "key 'target' value '0.0004' must be a number >= 0.001, e.g. '10' or '500m' (KEDA keeps targets "
            "in milli-units: a smaller one reaches the HPA as 0)",
            id="target below 1m (0 in the HPA)",
        ),
        pytest.param(
            {"metric": "m", "target": "900u"},
            "key 'target' value '900u' must be a number >= 0.001",
            id="target 0.0009: truncated to 0 by KEDA 2.17-2.19",
        ),
        pytest.param(
            {"metric": "m", "targetFromEnv": "0"},
            "key 'targetFromEnv' value '0' must be",
            id="a bad value is named by the key it came in",
        ),
        pytest.param(
            {"metricFromEnv": "m"},
            "KEDA drops a 'targetFromEnv' whose variable is unset or empty",
            id="target missing says what KEDA does with an unset variable",
        ),
        pytest.param(
            {"metric": "m", "target": "1", "targetFromEnv": "2"},
            "scalerMetadata keys 'target' and 'targetFromEnv' are both set: give one of them",
            id="a key given both ways",
        ),
        pytest.param(
            {"metric": "m", "target": "1", "labelSelectorFromEnv": "a in (b"},
            "scalerMetadata key 'labelSelectorFromEnv' is not a valid label selector",
            id="bad selector from the environment",
        ),
        pytest.param(
            {"metric": "m", "target": "1", "tlsCertFile": "/ca.pem"},
            "KEDA 2.17 removed it and ignores it: give the CA as 'caCert' in a TriggerAuthentication",
            id="tlsCertFile, gone from KEDA since 2.17",
        ),
        pytest.param(
            {"metric": "m", "target": "1", "selectorFromEnv": "X"},
            "unknown scalerMetadata key 'selectorFromEnv': the keys are",
            id="FromEnv of an unknown key",
        ),
        pytest.param({"metric": "m", "target": "NaN"}, "key 'target' value 'NaN'", id="target NaN"),
        pytest.param({"metric": "m", "target": "inf"}, "key 'target' value 'inf'", id="target infinite"),
        pytest.param(
            {"metric": "m", "target": "1", "activationTarget": "-1"},
            "key 'activationTarget' value '-1' must be a number >= 0",
            id="activation negative",
        ),
        pytest.param(
            {"metric": "m", "target": "1", "labelSelector": "model_name>3"},
            "scalerMetadata key 'labelSelector' is not a valid label selector",
            id="selector operator >",
        ),
        pytest.param(
            {"metric": "m", "target": "1", "labelSelector": "model_name in (a"},
            "scalerMetadata key 'labelSelector' is not a valid label selector",
            id="selector unbalanced",
        ),
        pytest.param(
            {"metric": "m", "target": "1", "labelselector": "a=b"},
            "unknown scalerMetadata key 'labelselector': the keys are",
            id="misspelt key",
        ),
        pytest.param(
            {"metric": "m", "target": "1", "activationThreshold": "5"},
            "use 'activationTarget'",
            id="another scaler's key with a hint",
        ),
        pytest.param(
            {"metric": "m", "target": "1", "x" * 500: "1"},
            "'" + "x" * 64 + "'... (500 characters)",
            id="a long key is echoed shortened",
        ),
    ],
)
def test_invalid_metadata_names_the_key(metadata: dict[str, str], message: str) -> None:
    """Each bad key or value is an InvalidMetadata (gRPC INVALID_ARGUMENT) whose message names it."""
    with pytest.raises(InvalidMetadata) as caught:
        parse("prod", metadata)
    assert message in str(caught.value)
    assert caught.value.code == 400
    assert caught.value.status("m")["message"] == str(caught.value), (
        "the caller's own input is safe to return"
    )
    assert len(str(caught.value)) < 400


@pytest.mark.parametrize(
    "namespace",
    ["", "Prod", "a_b", "-", "prod-", "a" * 64, "pröd", "a\x00b", "a" * 6000],
    ids=[
        "empty",
        "upper case",
        "underscore",
        "lone dash",
        "trailing dash",
        "64 characters",
        "non-ASCII",
        "NUL",
        "6000 characters",
    ],
)
def test_namespace_must_be_a_dns_label(namespace: str) -> None:
    """The namespace is checked as the kube-apiserver checks names (RFC 1123 label), before any cost."""
    with pytest.raises(InvalidMetadata) as caught:
        parse(namespace, {"metric": "m", "target": "1"})
    assert str(caught.value).startswith("invalid namespace ")
    assert "RFC 1123" in str(caught.value)
    assert len(str(caught.value)) < 300
    assert namespace[:20].encode("unicode_escape").decode() in str(caught.value), "the input, escaped"


@pytest.mark.parametrize("namespace", ["a", "0", "team-a-01", "a" * 63])
def test_valid_namespaces(namespace: str) -> None:
    assert parse(namespace, {"metric": "m", "target": "1"}).namespace == namespace
