"""The chart's copies of the rules: the PrometheusRule renders the generated rules, its parameters act
as the Python ones do, and the Alertmanager Secret carries the example routing (real `helm`, `promtool`
and `amtool`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts import generate
from alerts.params import Params
from tests.rule_files import ROOT, RULES_FILE, binary, run

EXAMPLE_AM = ROOT / "alerts" / "alertmanager.example.yaml"
CHART = ROOT / "helm"


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart with only what the alerting templates use (metadata, values, schema, helpers, the rules
    file): the same render of these templates, without the seconds the full chart spends generating
    certificates. `test_chart_rules_equal_the_generated_rules` renders the full chart."""
    slim = tmp_path_factory.mktemp("chart") / "vllm-autoscale"
    keep = [
        "Chart.yaml",
        "values.yaml",
        "values.schema.json",
        *(f"templates/{p.name}" for p in CHART.glob("templates/_*.tpl")),
        "templates/prometheusrule.yaml",
        "templates/alertmanager-config-secret.yaml",
        str(generate.HELM_PATH.relative_to("helm")),
    ]
    for relative in keep:
        if (CHART / relative).exists():
            (slim / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(CHART / relative, slim / relative)
    return slim


def helm_template(chart: Path, template: str, *args: str) -> list[dict[str, Any]]:
    """Render one template of the chart with `helm template` and parse its documents."""
    result = run([binary("helm"), "template", "release", str(chart), "--show-only", template, *args])
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def helm_error(chart: Path, *args: str) -> str:
    result = run([binary("helm"), "template", "release", str(chart), *args])
    assert result.returncode != 0, "helm template should have failed"
    return result.stderr


def test_chart_rules_equal_the_generated_rules() -> None:
    """With default values the PrometheusRule's spec is the generated rules file: equal as parsed YAML,
    and byte-identical when both are dumped the same way."""
    (rule,) = helm_template(CHART, "templates/prometheusrule.yaml")
    assert rule["kind"] == "PrometheusRule" and rule["apiVersion"] == "monitoring.coreos.com/v1"
    expected = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    assert rule["spec"] == expected
    assert yaml.safe_dump(rule["spec"]).encode() == yaml.safe_dump(expected).encode()


OVERRIDES: dict[str, Any] = {
    "tpot_page_ratio": 2.5,
    "tpot_for": "20m",
    "dlq_depth_threshold": 3,
    "vllm_selector": 'model_name!="", namespace=~"team-.*"',
    "dlq_depth_expr": 'max by (queue_name) (rabbitmq_queue_messages{queue=~".*\\\\.dead", vhost="a\\"b"})',
    "adapter_selector": 'job="custom-adapter"',
}


def test_chart_params_override_thresholds_as_the_python_params_do(chart: Path, tmp_path: Path) -> None:
    """prometheusRule.params change the rendered rules exactly as the same Params change the plain file,
    quotes and backslashes in expressions included."""
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"prometheusRule": {"params": OVERRIDES}}))
    (rule,) = helm_template(chart, "templates/prometheusrule.yaml", "-f", str(values))
    expected = yaml.safe_load(generate.render_rules(Params(**OVERRIDES)))
    assert rule["spec"] == expected
    page = next(
        r
        for g in rule["spec"]["groups"]
        for r in g["rules"]
        if r.get("alert") == "VLLMTPOTDrift" and r["labels"]["severity"] == "page"
    )
    assert ") > 2.5\n" in page["expr"] and page["for"] == "20m"
    assert "the page threshold is 2.5×" in page["annotations"]["description"]
    assert rule["spec"] != yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))


@pytest.mark.parametrize("overrides", [{}, OVERRIDES], ids=["defaults", "overrides"])
def test_promtool_accepts_the_chart_rules(chart: Path, tmp_path: Path, overrides: dict[str, Any]) -> None:
    """Each rendered PrometheusRule spec is a valid Prometheus rule file (kubernetes-validate skips CRDs)."""
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"prometheusRule": {"params": overrides}}))
    (rule,) = helm_template(chart, "templates/prometheusrule.yaml", "-f", str(values))
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(rule["spec"]))
    result = run([binary("promtool"), "check", "rules", str(spec)])
    assert result.returncode == 0, result.stdout + result.stderr


def _no_ready_for(chart: Path, tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    (rule,) = helm_template(chart, "templates/prometheusrule.yaml", "-f", str(path))
    (alert,) = [
        r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == "VLLMNoReadyReplica"
    ]
    duration: str = alert["for"]
    assert f"no ready replica for {duration}:" in alert["annotations"]["description"]
    return duration


@pytest.mark.parametrize(
    ("cold_starts", "params", "expected"),
    [
        pytest.param([600], {}, "15m", id="the default cold start: the plain file's 15m"),
        pytest.param([900, 300], {}, "20m", id="the longest cold start plus 5m"),
        pytest.param([650], {}, "950s", id="seconds when not whole minutes"),
        pytest.param([900], {"no_ready_replica_for": "7m"}, "7m", id="an explicit param wins"),
    ],
)
def test_no_ready_replica_waits_for_the_models_cold_start(
    chart: Path, tmp_path: Path, cold_starts: list[int], params: dict[str, str], expected: str
) -> None:
    """VLLMNoReadyReplica's `for:` follows the models' largest coldStartSeconds plus 5 minutes, so a
    healthy wake-up from zero (cold start, a GPU node, the image) never pages; a param overrides it."""
    models = [
        {
            "name": f"m{i}",
            "model": "org/model",
            "coldStartSeconds": seconds,
            "autoscaling": {"maxReplicas": 2},
        }
        for i, seconds in enumerate(cold_starts)
    ]
    values = {"models": models, "prometheusRule": {"params": params}}
    assert _no_ready_for(chart, tmp_path, values) == expected


def test_chart_refuses_an_unknown_param(chart: Path) -> None:
    """A misspelt parameter fails the render and names the valid ones, instead of being ignored."""
    stderr = helm_error(chart, "--set", "prometheusRule.params.tpot_page_ration=3")
    assert 'prometheusRule.params key "tpot_page_ration" must be one of' in stderr
    assert "tpot_page_ratio" in stderr


def test_chart_rule_labels_and_toggle(chart: Path) -> None:
    """prometheusRule.labels are added for Prometheus' ruleSelector; enabled=false renders nothing."""
    (rule,) = helm_template(
        chart, "templates/prometheusrule.yaml", "--set", "prometheusRule.labels.release=kps"
    )
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert rule["metadata"]["labels"]["app.kubernetes.io/part-of"] == "vllm-autoscale"
    result = run(
        [
            binary("helm"),
            "template",
            "release",
            str(chart),
            "--set",
            "prometheusRule.enabled=false",
            "--show-only",
            "templates/prometheusrule.yaml",
        ]
    )
    assert result.returncode != 0 and "could not find template" in result.stderr


def test_example_alertmanager_config_is_valid() -> None:
    """amtool accepts the example routing."""
    result = run([binary("amtool"), "check-config", str(EXAMPLE_AM)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_chart_alertmanager_secret_is_the_example_routing(chart: Path, tmp_path: Path) -> None:
    """The chart's Secret carries the example routing with the two webhook URLs from values, and amtool
    accepts it."""
    pager, ticket = "https://pager.test/hook?team=ml", "https://tickets.test/hook"
    (secret,) = helm_template(
        chart,
        "templates/alertmanager-config-secret.yaml",
        "--set",
        "alertmanagerConfig.enabled=true",
        "--set",
        f"alertmanagerConfig.pagerWebhookUrl={pager}",
        "--set",
        f"alertmanagerConfig.ticketWebhookUrl={ticket}",
    )
    assert secret["kind"] == "Secret"
    rendered = yaml.safe_load(secret["stringData"]["alertmanager.yaml"])
    expected = yaml.safe_load(EXAMPLE_AM.read_text(encoding="utf-8"))
    urls = {"pager": pager, "ticket": ticket}
    for receiver in expected["receivers"]:
        receiver["webhook_configs"][0]["url"] = urls[receiver["name"]]
    assert rendered == expected
    config = tmp_path / "alertmanager.yaml"
    config.write_text(secret["stringData"]["alertmanager.yaml"])
    result = run([binary("amtool"), "check-config", str(config)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_chart_alertmanager_secret_needs_its_urls(chart: Path) -> None:
    """Enabling the Secret without a pager URL fails with the value to set; it is off by default."""
    stderr = helm_error(chart, "--set", "alertmanagerConfig.enabled=true")
    assert "alertmanagerConfig.pagerWebhookUrl is required" in stderr
    result = run(
        [
            binary("helm"),
            "template",
            "release",
            str(chart),
            "--show-only",
            "templates/alertmanager-config-secret.yaml",
        ]
    )
    assert result.returncode != 0 and "could not find template" in result.stderr
