"""templates/core-configmap-adapter.yaml: the adapter accepts the configuration the chart renders, and that
configuration finds the chart's own vLLM pods."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from adapter.config import Config, MetricSettings, load
from adapter.errors import ConfigError
from adapter.keda import metadata as scaler_metadata
from adapter.vocabulary import catalogue, roles, selectors
from tests.helm.conftest import ADAPTER, CHART, NAMESPACE, ONE_MODEL, SCENARIOS, Rendered, helm_template


def adapter_config(result: Rendered) -> Config:
    return load(result.one("ConfigMap", ADAPTER)["data"]["config.yaml"])


def autoscaler_queries(result: Rendered) -> list[tuple[str, str, selectors.Selector]]:
    """(object name, metric name, selector) of every metric an HPA or ScaledObject of the render asks
    the adapter for, the selector as the adapter parses it."""
    queries = []
    for hpa in result.find("HorizontalPodAutoscaler"):
        for metric in hpa["spec"]["metrics"]:
            external = metric["external"]["metric"]
            labels = external.get("selector", {}).get("matchLabels", {})
            text = ",".join(f"{key}={value}" for key, value in labels.items())
            queries.append((hpa["metadata"]["name"], external["name"], selectors.parse(text)))
    for scaled in result.find("ScaledObject"):
        for trigger in scaled["spec"]["triggers"]:
            query = scaler_metadata.parse(NAMESPACE, trigger["metadata"])
            queries.append((scaled["metadata"]["name"], query.metric, query.selector))
    return queries


def assert_serves_its_autoscalers(result: Rendered) -> Config:
    """The rendered config loads, and every metric the render's autoscalers name is in its catalogue; a
    metric bound to a role (a P/D pool's) is asked with that role in the selector, so the adapter
    answers for the pool the autoscaler scales (`roles.bind` neither refuses nor adds to it)."""
    config = adapter_config(result)
    served = {metric.name: metric for metric in config.catalogue()}
    for owner, name, selector in autoscaler_queries(result):
        assert name in served, f"{owner} scales on {name}, which the rendered adapter config does not serve"
        role = served[name].role
        if role is not None:
            assert roles.bind(selector, role, name) == selector, (
                f"{owner}: {name} without {role} in {selector}"
            )
    return config


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s) for s in (*SCENARIOS, "defaults")])
def test_adapter_loads_the_rendered_config(scenario: str, rendered: dict[str, Rendered]) -> None:
    """adapter.config.load accepts every scenario's config,
    listening on all interfaces at the container port."""
    result = rendered[scenario]
    config = adapter_config(result)
    assert config.server.address == "0.0.0.0"
    assert config.server.insecure_serving is False
    deployment = result.one("Deployment", ADAPTER)
    ports = {p["name"]: p for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert ports["https"]["containerPort"] == config.server.port


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s) for s in (*SCENARIOS, "defaults")])
def test_the_rendered_config_serves_every_autoscaler(scenario: str, rendered: dict[str, Rendered]) -> None:
    """No scenario renders an HPA or a ScaledObject on a metric its own adapter config does not serve
    (the P/D prefill pool's backlog needs the throughput the chart writes), nor on a pool's metric
    without the pool's role in its selector."""
    assert_serves_its_autoscalers(rendered[scenario])


def test_user_metrics_reach_the_adapter(rendered: dict[str, Rendered]) -> None:
    """User metrics from values (queue_depth, dlq_depth) are in the adapter's catalogue."""
    assert "queue_depth" in {m.name for m in adapter_config(rendered["scale-to-zero"]).catalogue()}
    names = {m.name for m in adapter_config(rendered["prometheus-cert-manager"]).catalogue()}
    assert "dlq_depth" in names


def test_the_forecast_reaches_the_adapter_and_the_hpa(rendered: dict[str, Rendered]) -> None:
    """The anticipating pair: the adapter serves the forecast with its horizon, and the HPA reads it
    beside in-flight requests (the controller takes the larger proposal)."""
    result = rendered["scrape-source"]
    (forecast,) = [m for m in adapter_config(result).catalogue() if m.name == catalogue.FORECAST]
    assert forecast == catalogue.forecast(75.0)
    (hpa,) = result.find("HorizontalPodAutoscaler")
    names = [m["external"]["metric"]["name"] for m in hpa["spec"]["metrics"]]
    assert names == [catalogue.FORECAST, "vllm_requests_inflight"]


@pytest.mark.parametrize("scenario", ["scrape-source", "two-models-pools"])
def test_scrape_discovery_matches_the_vllm_services(scenario: str, rendered: dict[str, Rendered]) -> None:
    """The scrape source's discovery selector matches every
    vLLM Service, whose port has the configured name."""
    result = rendered[scenario]
    config = adapter_config(result)
    assert config.source == "scrape"
    selector = selectors.parse(config.scrape.discovery_selector)
    services = [s for s in result.find("Service") if s["metadata"]["name"] != ADAPTER]
    assert services
    for service in services:
        assert selector.matches(service["metadata"]["labels"]), service["metadata"]["name"]
        assert config.scrape.port in {p["name"] for p in service["spec"]["ports"]}
    adapter_service = result.one("Service", ADAPTER)
    assert not selector.matches(adapter_service["metadata"]["labels"])


def _schema_sections() -> dict[str, Any]:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    config: dict[str, Any] = schema["properties"]["adapter"]["properties"]["config"]["properties"]
    return config


def test_schema_allows_only_keys_the_adapter_knows() -> None:
    """Every adapter.config key the chart's schema accepts is a field of the adapter's Config, so a value
    that passes `helm install` cannot make the adapter refuse to start on an unknown key."""
    hints = typing.get_type_hints(Config)
    sections = _schema_sections()
    assert set(sections) <= set(hints)
    for name, section in sections.items():
        if "properties" not in section:
            continue
        fields = {f.name for f in dataclasses.fields(hints[name])}
        assert set(section["properties"]) <= fields, (
            f"adapter.config.{name}: {set(section['properties']) - fields}"
        )
    metric_fields = {f.name for f in dataclasses.fields(MetricSettings)}
    assert set(sections["metrics"]["additionalProperties"]["properties"]) <= metric_fields


def test_scrape_source_with_promql_metric_is_refused_at_install(tmp_path: Path) -> None:
    """A PromQL metric (queue_depth) with the scrape source fails `helm install` naming the key, instead of an
    adapter that crash-loops on the same check at start-up (which the adapter's loader confirms)."""
    metric = {"query": "sum(queue_messages{<<.LabelMatchers>>})", "namespaced": False}
    values = {**ONE_MODEL, "adapter": {"config": {"source": "scrape", "metrics": {"queue_depth": metric}}}}
    result = helm_template(tmp_path, values=values)
    assert result.returncode != 0
    assert 'adapter.config.metrics.queue_depth.query is refused with adapter.config.source "scrape"' in (
        result.stderr
    )
    with pytest.raises(ConfigError, match="queue_depth"):
        load(json.dumps({"source": "scrape", "metrics": {"queue_depth": metric}}))
