"""What the dashboards show: the adapter's own queries where they chart a catalogue metric, resolved
quantiles only, every telemetry and DCGM series, no PromQL outside `dashboards/queries/`, and the chart's
ConfigMaps carrying the JSON."""

from __future__ import annotations

import ast
import re
import subprocess
from typing import Any

import pytest
import yaml

from adapter.telemetry import Telemetry
from adapter.vocabulary.catalogue import BUILTIN, builtin
from adapter.vocabulary.exporters import HPA_TARGET
from adapter.vocabulary.promql.catalogue import served_query, value_query
from dashboards import layout
from dashboards.queries import vllm_engine
from dashboards.queries.grafana import BY_POD
from tests.dashboard_json import DASHBOARDS, FILES, ROOT, data_panels, exprs, load

HELM = ROOT / ".tools" / "helm"


def panel_exprs(board: layout.Board, title: str) -> list[str]:
    """The queries of the panel titled `title` (exactly one) on `board`."""
    (panel,) = [p for p in data_panels(load(board.filename)) if p["title"] == title]
    return [target["expr"] for target in panel["targets"]]


def test_autoscaling_plots_each_catalogue_metric_exactly_as_the_adapter_queries_it() -> None:
    """For every BUILTIN metric, one panel holds `served_query(metric, model matchers)` (the adapter's
    `value_query`, a quantile wrapped in the bucket-range filter that mirrors its refusal to serve it)
    and its HPA target."""
    dashboard = load(layout.AUTOSCALING.filename)
    for metric in BUILTIN:
        served = served_query(metric, vllm_engine.HPA_VIEW)
        assert value_query(metric, vllm_engine.HPA_VIEW) in served
        matching = [p for p in data_panels(dashboard) if any(t["expr"] == served for t in p["targets"])]
        assert len(matching) == 1, f"{metric.name}: {len(matching)} panels plot the served value"
        target_exprs = [t["expr"] for t in matching[0]["targets"]]
        assert any(HPA_TARGET in e and f'metric_name=~"(s[0-9]+-)?{metric.name}"' in e for e in target_exprs)


@pytest.mark.parametrize(
    ("board", "title", "metric"),
    [
        (layout.AUTOSCALING, "In flight per pod ($model)", "vllm_requests_inflight"),
        (layout.KV_LATENCY, "TPOT mean per pod", "vllm_tpot_seconds"),
        (layout.GPU, "Running requests per pod", "vllm_requests_running"),
    ],
)
def test_per_pod_panels_are_the_catalogue_query_grouped_by_pod(
    board: layout.Board, title: str, metric: str
) -> None:
    """A catalogue metric broken down per pod is its own `value_query`, grouped by pod, never rebuilt:
    a pod exposing only one of inflight's two families still has a line."""
    expected = value_query(builtin(metric), vllm_engine.VLLM, by=BY_POD)
    assert panel_exprs(board, title) == [expected]
    if metric == "vllm_requests_inflight":
        # `(running + waiting) or running or waiting`, waiting itself `capacity part or plain gauge`
        assert expected.count(" or ") == 4


def test_autoscaling_metric_row_repeats_per_model() -> None:
    """The HPA's view is per model (its selector), so that row repeats for each selected model."""
    rows = [p for p in load(layout.AUTOSCALING.filename)["panels"] if p["type"] == "row"]
    assert [r["repeat"] for r in rows if r["repeat"]] == ["model"]


def test_prefix_cache_hit_rate_divides_cached_prompt_tokens_by_prompt_tokens() -> None:
    """Never from the query counter, which inflates 4-11x under KV pressure (vllm-metrics.md §8)."""
    seen = 0
    for name in FILES:
        dashboard = load(name)
        assert not any("prefix_cache_queries" in e for e in exprs(dashboard))
        for panel in data_panels(dashboard):
            if "Prefix-cache hit rate" in panel["title"]:
                expr = panel["targets"][0]["expr"]
                numerator, denominator = expr.split(" / ")
                assert "vllm:prompt_tokens_cached_total" in numerator
                assert "vllm:prompt_tokens_total" in denominator
                seen += 1
    assert seen >= 2


def test_vllm_quantiles_are_dropped_outside_the_resolved_buckets() -> None:
    """Every histogram_quantile over a vLLM family keeps
    only values above its first and below its last bound."""
    bounds = {}
    for h in (vllm_engine.TTFT, vllm_engine.TPOT, vllm_engine.ITL, vllm_engine.E2E, vllm_engine.QUEUE_TIME):
        for family_name in h.family:
            bounds[family_name] = (h.buckets[0], h.buckets[-1])
    checked = 0
    for name in FILES:
        for expr in exprs(load(name)):
            if "histogram_quantile" not in expr or "vllm:" not in expr:
                continue
            family = re.search(r"(vllm:\w+)_bucket", expr)
            assert family, expr
            first, last = bounds[family.group(1)]
            assert re.search(rf"\) > {first:g}\) < {last:g}$", expr), expr
            checked += 1
    assert checked >= 12


def test_adapter_dashboard_charts_every_telemetry_metric() -> None:
    """Each of the adapter's own metric families appears in some adapter-health query."""
    text = "\n".join(exprs(load(layout.ADAPTER.filename)))
    families = [family.name for family in Telemetry().registry.collect()]
    assert families
    for family in families:
        assert family in text, f"{family} is on no adapter-health panel"


def test_gpu_dashboard_reads_every_required_dcgm_field() -> None:
    """Utilisation, framebuffer used/free, temperature, power, throttle reasons and XID errors."""
    text = "\n".join(exprs(load(layout.GPU.filename)))
    for field in (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "DCGM_FI_DEV_XID_ERRORS",
    ):
        assert field in text, field


PROMQL_MARKERS = re.compile(
    r"\b(rate|irate|increase|sum|avg|max|min|count|histogram_quantile|label_values)\s*(\(|by\s*\()|[=!]~\""
)


DASHBOARD_MODULES = sorted(
    path.stem for path in DASHBOARDS.glob("*.py") if path.stem not in ("__init__", "generate")
)


@pytest.mark.parametrize("module", DASHBOARD_MODULES)
def test_panel_modules_hold_no_promql(module: str) -> None:
    """PromQL lives in dashboards/queries/ only (A3: queries separate from panels)."""
    tree = ast.parse((DASHBOARDS / f"{module}.py").read_text())
    # Docstrings may name PromQL functions; only values can be queries.
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            assert not PROMQL_MARKERS.search(node.value), f"PromQL in {module}.py: {node.value!r}"


def test_promql_marker_check_catches_a_literal() -> None:
    """The check above would fail on a typical inline query (so its silence means something)."""
    assert PROMQL_MARKERS.search('sum by (model_name) (rate(vllm:prompt_tokens_total{pod=~"$pod"}[5m]))')


# --- The chart's ConfigMaps -----------------------------------------------------------------------


def helm_template(*args: str) -> list[dict[str, Any]]:
    if not HELM.is_file():
        raise AssertionError(f"{HELM} is missing; run scripts/install-tools (make tools)")
    result = subprocess.run(
        [
            str(HELM),
            "template",
            "rel",
            str(ROOT / "helm"),
            "--namespace",
            "llm",
            "--show-only",
            "templates/grafana-dashboards-configmap.yaml",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0 and "could not find template" in result.stderr:
        return []  # the template rendered nothing (dashboards disabled)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.mark.integration
def test_chart_renders_one_labelled_configmap_per_dashboard_with_the_exact_json() -> None:
    """`helm template`: one ConfigMap per dashboard, sidecar
    label and annotations from values, data = file bytes."""
    docs = helm_template("--set", "grafanaDashboards.annotations.grafana_folder=vLLM")
    assert [d["kind"] for d in docs] == ["ConfigMap"] * len(FILES)
    keys = sorted(key for d in docs for key in d["data"])
    assert keys == FILES
    names = [d["metadata"]["name"] for d in docs]
    assert len(set(names)) == len(names) and all(len(n) <= 63 for n in names), names
    for doc in docs:
        assert doc["metadata"]["namespace"] == "llm"
        assert doc["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert doc["metadata"]["annotations"] == {"grafana_folder": "vLLM"}
        ((key, text),) = doc["data"].items()
        assert text == (DASHBOARDS / key).read_text(), f"{key} in the ConfigMap differs from the file"


@pytest.mark.integration
def test_chart_label_is_configurable_and_dashboards_can_be_disabled() -> None:
    """A custom sidecar label/value is used as given; `enabled: false` renders no ConfigMap."""
    docs = helm_template(
        "--set", "grafanaDashboards.label=team_dashboards", "--set-string", "grafanaDashboards.labelValue=yes"
    )
    assert docs and all(d["metadata"]["labels"]["team_dashboards"] == "yes" for d in docs)
    assert all("grafana_dashboard" not in d["metadata"]["labels"] for d in docs)
    assert helm_template("--set", "grafanaDashboards.enabled=false") == []
