"""values.schema.json: a bad value fails `helm template` (and so `helm install`) with a message naming it.

helm reports every schema violation at once, so all bad values go into one values file (each model case
as its own `models[]` entry, the rest at distinct keys) and each case checks that its own key path and
broken rule are in the report: one helm run instead of thirty.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.helm.conftest import CHART, HelmResult, helm_template


def _model(**overrides: Any) -> dict[str, Any]:
    return {"name": "m", "model": "org/model", "autoscaling": {"maxReplicas": 3}, **overrides}


#: id → (one models[] entry, fragments of the error; {m} is that entry's path such as /models/3)
BAD_MODELS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "gpu memory utilization above 1": (
        _model(gpuMemoryUtilization=1.5),
        ("{m}/gpuMemoryUtilization': maximum: got 1.5, want 1",),
    ),
    "gpu memory utilization of 0": (
        _model(gpuMemoryUtilization=0),
        ("{m}/gpuMemoryUtilization': exclusiveMinimum",),
    ),
    "zero gpus": (_model(gpu={"count": 0}), ("{m}/gpu/count': minimum: got 0, want 1",)),
    "gpu resource without vendor": (
        _model(gpu={"resource": "gpu"}),
        ("{m}/gpu/resource': 'gpu' does not match pattern",),
    ),
    "model name not a DNS label": (
        _model(name="Llama_8B"),
        ("{m}/name': 'Llama_8B' does not match pattern",),
    ),
    "served name unusable as a label value": (
        _model(servedModelName="meta-llama/Llama-3.1-8B"),
        ("{m}/servedModelName': 'meta-llama/Llama-3.1-8B' does not match pattern",),
    ),
    "model missing": ({"name": "m", "autoscaling": {"maxReplicas": 2}}, ("{m}': missing property 'model'",)),
    "maxReplicas of 0": (
        _model(autoscaling={"maxReplicas": 0}),
        ("{m}/autoscaling/maxReplicas': minimum: got 0, want 1",),
    ),
    "negative minReplicas": (
        _model(autoscaling={"minReplicas": -1, "maxReplicas": 2}),
        ("{m}/autoscaling/minReplicas': minimum: got -1, want 0",),
    ),
    "hpa metric with both targets": (
        _model(
            autoscaling={
                "maxReplicas": 2,
                "metrics": [{"name": "vllm_requests_waiting", "value": 1, "averageValue": 1}],
            }
        ),
        ("{m}/autoscaling/metrics/0': 'oneOf' failed, subschemas 0, 1 matched",),
    ),
    "hpa metric without a target": (
        _model(autoscaling={"maxReplicas": 2, "metrics": [{"name": "vllm_requests_waiting"}]}),
        ("{m}/autoscaling/metrics/0': 'oneOf' failed, none matched",),
    ),
    "unknown model key": (_model(maxNumSeq=64), ("{m}': additional properties 'maxNumSeq' not allowed",)),
    "cold start as text": (
        _model(coldStartSeconds="5m"),
        ("{m}/coldStartSeconds': got string, want integer",),
    ),
    "cache type misspelled": (
        _model(modelCache={"type": "pvc"}),
        ("{m}/modelCache/type': value must be one of",),
    ),
    "bad shm quantity": (_model(shmSize="8 GB"), ("{m}/shmSize': 'anyOf' failed",)),
    "cold start too short to load anything": (
        _model(coldStartSeconds=5),
        ("{m}/coldStartSeconds': minimum: got 5, want 10",),
    ),
    "max model len with a space": (_model(maxModelLen="32 k"), ("{m}/maxModelLen': 'anyOf' failed",)),
    "hpa selector value with a slash": (
        _model(
            autoscaling={
                "maxReplicas": 2,
                "metrics": [{"name": "queue_depth", "averageValue": 5, "selector": {"queue": "a/b"}}],
            }
        ),
        ("{m}/autoscaling/metrics/0/selector/queue': 'a/b' does not match pattern",),
    ),
    "pull policy misspelled": (
        _model(image={"repository": "vllm/vllm-openai", "pullPolicy": "IfMissing"}),
        ("{m}/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'",),
    ),
    "cache access mode misspelled": (
        _model(modelCache={"accessModes": ["RWX"]}),
        ("{m}/modelCache/accessModes/0': value must be one of",),
    ),
    "selector key that would break selector text": (
        _model(
            autoscaling={
                "maxReplicas": 2,
                "metrics": [{"name": "queue_depth", "averageValue": 5, "selector": {"queue,x": "a"}}],
            }
        ),
        ("invalid propertyName 'queue,x'",),
    ),
    "activation target not a quantity": (
        _model(
            autoscaling={
                "maxReplicas": 2,
                "metrics": [{"name": "queue_depth", "averageValue": 5, "activationTarget": "five"}],
            }
        ),
        ("{m}/autoscaling/metrics/0/activationTarget': 'anyOf' failed",),
    ),
    "keda fallback of 0 replicas": (
        _model(autoscaling={"maxReplicas": 2, "keda": {"fallback": {"replicas": 0}}}),
        ("{m}/autoscaling/keda/fallback/replicas': 'anyOf' failed",),
    ),
    "keda fallback behaviour misspelled": (
        _model(autoscaling={"maxReplicas": 2, "keda": {"fallback": {"behavior": "current"}}}),
        ("{m}/autoscaling/keda/fallback/behavior': value must be one of",),
    ),
    "keda polling interval of 0": (
        _model(autoscaling={"maxReplicas": 2, "keda": {"pollingInterval": 0}}),
        ("{m}/autoscaling/keda/pollingInterval': minimum: got 0, want 1",),
    ),
}

#: id → (values at keys no other case uses, fragments of the error)
BAD_SETTINGS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "unknown top-level key": ({"modles": []}, ("additional properties 'modles' not allowed",)),
    "adapter source misspelled": (
        {"adapter": {"config": {"source": "prom"}}},
        ("/adapter/config/source': value must be one of 'prometheus', 'scrape'",),
    ),
    "prometheus url without scheme": (
        {"adapter": {"config": {"prometheus": {"url": "prometheus:9090"}}}},
        ("/adapter/config/prometheus/url': 'prometheus:9090' does not match pattern",),
    ),
    "unknown adapter config key": (
        {"adapter": {"config": {"sources": "scrape"}}},
        ("/adapter/config': additional properties 'sources' not allowed",),
    ),
    "metric quantile of 1": (
        {"adapter": {"config": {"metrics": {"vllm_ttft_seconds": {"quantile": 1}}}}},
        ("/adapter/config/metrics/vllm_ttft_seconds/quantile': exclusiveMaximum",),
    ),
    "tls mode misspelled": (
        {"adapter": {"tls": {"mode": "cert-manager"}}},
        ("/adapter/tls/mode': value must be one of",),
    ),
    "anti-affinity misspelled": (
        {"adapter": {"podAntiAffinity": "strict"}},
        ("/adapter/podAntiAffinity': value must be one of 'soft', 'hard', 'none'",),
    ),
    "monitor kind misspelled": (
        {"monitoring": {"vllm": {"kind": "Podmonitor"}}},
        ("/monitoring/vllm/kind': value must be one of 'PodMonitor', 'ServiceMonitor'",),
    ),
    "scrape interval without unit": (
        {"monitoring": {"vllm": {"interval": "15"}}},
        ("/monitoring/vllm/interval': '15' does not match pattern",),
    ),
    "alert param as a list": (
        {"prometheusRule": {"params": {"tpot_page_ratio": [2]}}},
        ("/prometheusRule/params/tpot_page_ratio': got array, want number or string",),
    ),
    "pager webhook not a URL": (
        {"alertmanagerConfig": {"pagerWebhookUrl": "pager"}},
        ("/alertmanagerConfig/pagerWebhookUrl': 'pager' does not match pattern",),
    ),
    "adapter replicas of 0": (
        {"adapter": {"replicas": 0}},
        ("/adapter/replicas': minimum: got 0, want 1",),
    ),
    "adapter metrics authorization misspelled": (
        {"monitoring": {"adapter": {"authorization": "token"}}},
        ("/monitoring/adapter/authorization': value must be one of 'bearer', 'none'",),
    ),
    "ca bundle that is no PEM": (
        {"adapter": {"tls": {"existingSecret": {"caBundle": "LS0tLS1CRUdJTg=="}}}},
        ("/adapter/tls/existingSecret/caBundle': 'LS0tLS1CRUdJTg==' does not match pattern",),
    ),
    "external metrics reader of an unknown kind": (
        {"rbac": {"externalMetricsReaders": [{"kind": "Account", "name": "hpa"}]}},
        ("/rbac/externalMetricsReaders/0/kind': value must be one of 'ServiceAccount', 'User', 'Group'",),
    ),
    "group priority out of range": (
        {"apiService": {"groupPriorityMinimum": 0}},
        ("/apiService/groupPriorityMinimum': minimum: got 0, want 1",),
    ),
    "autoscaler misspelled": (
        {"autoscaler": "KEDA"},
        ("/autoscaler': value must be one of 'hpa', 'keda'",),
    ),
    "keda trigger type misspelled": (
        {"keda": {"triggerType": "push"}},
        ("/keda/triggerType': value must be one of 'external', 'external-push'",),
    ),
    "keda client certificate mode misspelled": (
        {"keda": {"clientCertificate": {"mode": "certManager"}}},
        ("/keda/clientCertificate/mode': value must be one of 'generated', 'existingSecret', 'none'",),
    ),
    "keda port out of range": (
        {"keda": {"port": 70000}},
        ("/keda/port': maximum: got 70,000, want 65,535",),
    ),
    "pool key not a DNS label": (
        {"gpuPools": {"Spot_Pool": {"nodeSelector": {}}}},
        ("invalid propertyName 'Spot_Pool'", "'Spot_Pool' does not match pattern"),
    ),
}


def _merge(into: dict[str, Any], values: dict[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            assert key not in into, f"two cases set {key!r}: they would mask each other"
            into[key] = value


def _expected(case: str) -> tuple[str, ...]:
    if case in BAD_MODELS:
        index = list(BAD_MODELS).index(case)
        return tuple(fragment.format(m=f"/models/{index}") for fragment in BAD_MODELS[case][1])
    return BAD_SETTINGS[case][1]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> HelmResult:
    values: dict[str, Any] = {"models": [model for model, _ in BAD_MODELS.values()]}
    for settings, _ in BAD_SETTINGS.values():
        _merge(values, json.loads(json.dumps(settings)))
    return helm_template(tmp_path_factory.mktemp("schema"), values=values)


@pytest.mark.parametrize("case", [pytest.param(key, id=key) for key in (*BAD_MODELS, *BAD_SETTINGS)])
def test_schema_rejects_bad_value_naming_it(case: str, report: HelmResult) -> None:
    """helm refuses the values before rendering, and the message gives the key path and the broken rule."""
    assert report.returncode != 0
    assert "values don't meet the specifications of the schema" in report.stderr
    for fragment in _expected(case):
        assert fragment in report.stderr, f"{fragment!r} not in:\n{report.stderr}"


def test_good_values_pass_the_schema(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The same keys with sound values are accepted, so the rejections above are about the values."""
    good = _model(
        gpuMemoryUtilization=1, gpu={"resource": "nvidia.com/mig-1g.10gb", "count": 1}, shmSize="8Gi"
    )
    result = helm_template(tmp_path_factory.mktemp("good"), values={"models": [good]})
    assert result.returncode == 0, result.stderr


def test_schema_is_strict_at_the_top() -> None:
    """The schema forbids unknown top-level keys and describes every top-level key of values.yaml."""
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert schema["additionalProperties"] is False
    assert set(values) == set(schema["properties"])
