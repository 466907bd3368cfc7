"""The generated dashboards: up to date, and structurally sound for Grafana.

No Grafana server can run here, so these tests check the JSON against Grafana's dashboard model
(schemaVersion, panel/target/variable fields, grid) rather than by loading it; every query is
run against a real Prometheus in tests/integration/test_dashboard_queries.py.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapter.catalogue import BUILTIN
from adapter.promql import value_query
from adapter.telemetry import Telemetry
from dashboards import generate, panels, queries

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "dashboards"
HELM_COPIES = ROOT / "helm" / "files" / "dashboards"
HELM = ROOT / ".tools" / "helm"
FILES = sorted(board.filename for board in panels.BOARDS)

#: Grafana 11 writes schemaVersion 39; anything older would be migrated on load, i.e. is not current
OLDEST_CURRENT_SCHEMA = 39
#: Grafana unit ids these dashboards may use (standard ones), plus the documented custom `count:<unit>`
GRAFANA_UNITS = {
    "s",
    "ms",
    "percentunit",
    "percent",
    "reqps",
    "ops",
    "short",
    "none",
    "celsius",
    "watt",
    "mbytes",
}
CUSTOM_UNIT = re.compile(r"^count:\S+$")
GRAFANA_BUILTIN_VARIABLES = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s"}
VARIABLE_REF = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")

VLLM_VARIABLES = ["datasource", "namespace", "model", "pod"]
EXPECTED_VARIABLES = {
    panels.OVERVIEW.filename: VLLM_VARIABLES,
    panels.AUTOSCALING.filename: [*VLLM_VARIABLES, "hpa", "queue"],
    panels.KV_LATENCY.filename: VLLM_VARIABLES,
    panels.GPU.filename: VLLM_VARIABLES,
    panels.ADAPTER.filename: ["datasource", "namespace", "pod", "metric"],
}


def load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((DASHBOARDS / name).read_text())
    return document


def all_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def data_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [panel for panel in all_panels(dashboard) if panel["type"] != "row"]


def exprs(dashboard: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in data_panels(dashboard) for target in panel["targets"]]


def variable_refs(text: str) -> set[str]:
    names = {next(group for group in match.groups() if group) for match in VARIABLE_REF.finditer(text)}
    # `$1` in label_replace is a regex group, not a Grafana variable.
    return {name for name in names if not name.isdigit()}


by_file = pytest.mark.parametrize("name", FILES)


# --- Generated, deterministic, and copied into the chart ----------------------------------------


def test_regenerating_reproduces_the_committed_files_byte_for_byte(tmp_path: Path) -> None:
    """A fresh `generate` into tmp_path must equal dashboards/*.json and helm/files/dashboards/*.json."""
    fresh_dashboards, fresh_helm = tmp_path / "dashboards", tmp_path / "helm"
    generate.write([fresh_dashboards, fresh_helm])
    for committed_dir, fresh_dir in ((DASHBOARDS, fresh_dashboards), (HELM_COPIES, fresh_helm)):
        committed = sorted(p.name for p in committed_dir.glob("*.json"))
        assert committed == FILES, f"{committed_dir} holds {committed}, expected {FILES}"
        for name in FILES:
            assert (committed_dir / name).read_bytes() == (fresh_dir / name).read_bytes(), (
                f"{committed_dir / name} is stale: run `make generate`"
            )


def test_generation_is_deterministic() -> None:
    """Two renders in one process are identical (no timestamps, random ids or dict-order effects)."""
    assert generate.render() == generate.render()


def test_output_format_is_sorted_indented_and_newline_terminated() -> None:
    """Files are `json.dumps(sort_keys=True, indent=2)` plus one trailing newline (STYLE rule 11)."""
    for name in FILES:
        text = (DASHBOARDS / name).read_text()
        assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n", name


def test_check_mode_reports_a_stale_or_extra_file(tmp_path: Path) -> None:
    """`generate --check` exits 0 on fresh output and 1 once a file is edited or an extra one appears."""
    dirs = [tmp_path / "d", tmp_path / "h"]
    generate.write(dirs)
    args = ["--check", "--dashboards-dir", str(dirs[0]), "--helm-dir", str(dirs[1])]
    assert generate.main(args) == 0
    edited = dirs[1] / FILES[0]
    edited.write_text(edited.read_text().replace('"refresh": "30s"', '"refresh": "5s"'))
    assert generate.main(args) == 1
    generate.write(dirs)
    (dirs[0] / "hand-made.json").write_text("{}\n")
    assert generate.main(args) == 1


def test_every_file_is_marked_as_generated() -> None:
    """The description names its source and says not to edit the JSON (JSON has no comments)."""
    for name in FILES:
        assert "Generated by `make generate`" in load(name)["description"], name


# --- Grafana dashboard model --------------------------------------------------------------------


@by_file
def test_schema_version_is_current(name: str) -> None:
    """schemaVersion is the one the generator pins, and recent enough that Grafana 11+ needs no migration."""
    version = load(name)["schemaVersion"]
    assert version == panels.SCHEMA_VERSION
    assert version >= OLDEST_CURRENT_SCHEMA


@by_file
def test_panel_ids_are_unique_and_stable(name: str) -> None:
    """Ids are 1..n in layout order, so regenerating after an edit keeps unrelated panels' ids (and links)."""
    ids = [panel["id"] for panel in all_panels(load(name))]
    assert ids == list(range(1, len(ids) + 1))


@by_file
def test_grid_positions_fit_and_do_not_overlap(name: str) -> None:
    """Every panel lies within the 24 columns and no two panels share a grid cell."""
    occupied: dict[tuple[int, int], str] = {}
    for panel in all_panels(load(name)):
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["y"] >= 0 and pos["w"] > 0 and pos["h"] > 0, panel["title"]
        assert pos["x"] + pos["w"] <= 24, f"{panel['title']} overflows the grid"
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in occupied, f"{panel['title']} overlaps {occupied[(x, y)]}"
                occupied[(x, y)] = panel["title"]


@by_file
def test_every_panel_and_target_queries_the_datasource_variable(name: str) -> None:
    """No panel or query is pinned to a data source uid: all follow `$datasource`."""
    variable = {"type": "prometheus", "uid": "${datasource}"}
    for panel in data_panels(load(name)):
        assert panel["datasource"] == variable, panel["title"]
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target["datasource"] == variable, panel["title"]
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(set(ref_ids)) == len(ref_ids), panel["title"]


@by_file
def test_every_panel_has_a_known_unit_thresholds_and_a_description(name: str) -> None:
    """Units are Grafana ids; thresholds start with a base step and rise; descriptions are not empty."""
    for panel in data_panels(load(name)):
        defaults = panel["fieldConfig"]["defaults"]
        unit = defaults["unit"]
        assert unit in GRAFANA_UNITS or CUSTOM_UNIT.match(unit), f"{panel['title']}: unknown unit {unit!r}"
        steps = defaults["thresholds"]["steps"]
        assert defaults["thresholds"]["mode"] == "absolute"
        assert steps and steps[0]["value"] is None, f"{panel['title']}: thresholds need a base step"
        values = [step["value"] for step in steps[1:]]
        assert values == sorted(values), f"{panel['title']}: threshold steps must rise"
        assert panel["description"].strip(), f"{panel['title']} has no description"
        if unit == "percentunit" and panel["type"] == "timeseries":
            assert (defaults["min"], defaults["max"]) == (0, 1), f"{panel['title']}: a 0-1 ratio axis"


@by_file
def test_variables_are_present_multi_select_with_all(name: str) -> None:
    """datasource first, then the dashboard's query variables: multi-select, All = `.*`, on `$datasource`."""
    variables = load(name)["templating"]["list"]
    assert [v["name"] for v in variables] == EXPECTED_VARIABLES[name]
    assert (variables[0]["type"], variables[0]["query"]) == ("datasource", "prometheus")
    for variable in variables[1:]:
        assert variable["type"] == "query"
        assert variable["multi"] and variable["includeAll"] and variable["allValue"] == ".*", variable["name"]
        assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert re.fullmatch(r"label_values\(.+, \w+\)", variable["query"]), variable["query"]


@by_file
def test_every_variable_reference_is_defined_before_use(name: str) -> None:
    """Queries, titles and annotations use only declared variables; a variable uses only earlier ones."""
    dashboard = load(name)
    declared: list[str] = []
    for variable in dashboard["templating"]["list"]:
        undefined = variable_refs(variable["query"]) - set(declared)
        assert not undefined, f"variable {variable['name']} uses {undefined} before they are declared"
        declared.append(variable["name"])
    allowed = set(declared) | GRAFANA_BUILTIN_VARIABLES
    texts = [*exprs(dashboard), *(panel["title"] for panel in all_panels(dashboard))]
    texts += [a["expr"] for a in dashboard["annotations"]["list"] if "expr" in a]
    for text in texts:
        assert variable_refs(text) <= allowed, f"undefined variable in {text!r}"
    for panel in all_panels(dashboard):
        if panel.get("repeat"):
            assert panel["repeat"] in declared


@by_file
def test_links_reach_every_other_dashboard_and_the_runbook(name: str) -> None:
    """Dashboard links go to each other dashboard by uid (keeping time) and to the runbook."""
    dashboard = load(name)
    urls = {link["url"]: link for link in dashboard["links"]}
    for board in panels.BOARDS:
        if board.filename != name:
            assert urls[f"/d/{board.uid}"]["keepTime"], board.uid
            assert load(board.filename)["uid"] == board.uid
    assert panels.RUNBOOK_URL in urls
    panel_links = [link["url"] for panel in data_panels(dashboard) for link in panel["links"]]
    assert any(url.startswith(panels.RUNBOOK_URL) for url in panel_links), "no panel links to the runbook"


def alert_runbook_urls() -> set[str]:
    rules = yaml.safe_load((ROOT / "alerts" / "vllm-autoscale.rules.yaml").read_text())
    return {r["annotations"]["runbook_url"] for g in rules["groups"] for r in g["rules"] if "alert" in r}


@by_file
def test_runbook_sections_linked_from_panels_are_those_of_real_alerts(name: str) -> None:
    """A panel's runbook anchor is the runbook_url of an alert in the generated rules (no link points nowhere)."""
    known = alert_runbook_urls()
    assert known, "the rules file lists no alert"
    for panel in data_panels(load(name)):
        for link in panel["links"]:
            if "#" in link["url"]:
                assert link["url"] in known, f"{panel['title']}: {link['url']} is no alert's runbook section"


@by_file
def test_vllm_queries_aggregate_engines_away(name: str) -> None:
    """No query keeps or selects the data-parallel `engine` label: per-pod values sum/max over engines."""
    for expr in exprs(load(name)):
        assert not re.search(r"\bengine\b", expr), expr


def test_uids_and_titles_are_unique_and_fit_grafana() -> None:
    """Grafana uids are at most 40 characters; two dashboards never share a uid or a title."""
    documents = [load(name) for name in FILES]
    uids = [d["uid"] for d in documents]
    assert len(set(uids)) == len(uids) and all(len(uid) <= 40 for uid in uids)
    assert len({d["title"] for d in documents}) == len(documents)


# --- Content rules ------------------------------------------------------------------------------


def test_autoscaling_plots_each_catalogue_metric_exactly_as_the_adapter_queries_it() -> None:
    """For every BUILTIN metric, one panel holds `value_query(metric, model matchers)` and its HPA target.

    A quantile may be wrapped in the bucket-range filter that mirrors the adapter's refusal to serve it.
    """
    dashboard = load(panels.AUTOSCALING.filename)
    for metric in BUILTIN:
        served = re.escape(value_query(metric, queries.HPA_VIEW))
        pattern = re.compile(rf"{served}|\(\({served}\) > [0-9.e+-]+\) < [0-9.e+-]+")
        matching = [
            p for p in data_panels(dashboard) if any(pattern.fullmatch(t["expr"]) for t in p["targets"])
        ]
        assert len(matching) == 1, f"{metric.name}: {len(matching)} panels plot the served value"
        target_exprs = [t["expr"] for t in matching[0]["targets"]]
        assert any(queries.HPA_TARGET in e and f'metric_name="{metric.name}"' in e for e in target_exprs)


def test_autoscaling_metric_row_repeats_per_model() -> None:
    """The HPA's view is per model (its selector), so that row repeats for each selected model."""
    rows = [p for p in load(panels.AUTOSCALING.filename)["panels"] if p["type"] == "row"]
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
    """Every histogram_quantile over a vLLM family keeps only values above its first and below its last bound."""
    bounds = {}
    for h in (queries.TTFT, queries.TPOT, queries.ITL, queries.E2E, queries.QUEUE_TIME):
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
    text = "\n".join(exprs(load(panels.ADAPTER.filename)))
    families = [family.name for family in Telemetry().registry.collect()]
    assert families
    for family in families:
        assert family in text, f"{family} is on no adapter-health panel"


def test_gpu_dashboard_reads_every_required_dcgm_field() -> None:
    """Utilisation, framebuffer used/free, temperature, power, throttle reasons and XID errors."""
    text = "\n".join(exprs(load(panels.GPU.filename)))
    for field in (
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_XID_ERRORS",
    ):  # fmt: skip
        assert field in text, field


PROMQL_MARKERS = re.compile(
    r"\b(rate|irate|increase|sum|avg|max|min|count|histogram_quantile|label_values)\s*(\(|by\s*\()|[=!]~\""
)


@pytest.mark.parametrize("module", ["overview", "autoscaling", "kv_latency", "gpu", "adapter_health"])
def test_panel_modules_hold_no_promql(module: str) -> None:
    """PromQL lives in dashboards/queries.py only (A3: queries separate from panels)."""
    tree = ast.parse((DASHBOARDS / f"{module}.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert not PROMQL_MARKERS.search(node.value), f"PromQL in {module}.py: {node.value!r}"


def test_promql_marker_check_catches_a_literal() -> None:
    """The check above would fail on a typical inline query (so its silence means something)."""
    assert PROMQL_MARKERS.search('sum by (model_name) (rate(vllm:prompt_tokens_total{pod=~"$pod"}[5m]))')


# --- The chart's ConfigMaps -----------------------------------------------------------------------


def helm_template(*args: str) -> list[dict[str, Any]]:
    if not HELM.is_file():
        raise AssertionError(f"{HELM} is missing; run scripts/install-tools (make tools)")
    result = subprocess.run(
        [str(HELM), "template", "rel", str(ROOT / "helm"), "--namespace", "llm",
         "--show-only", "templates/grafana-dashboards-configmap.yaml", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if result.returncode != 0 and "could not find template" in result.stderr:
        return []  # the template rendered nothing (dashboards disabled)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.mark.integration
def test_chart_renders_one_labelled_configmap_per_dashboard_with_the_exact_json() -> None:
    """`helm template`: one ConfigMap per dashboard, sidecar label and annotations from values, data = file bytes."""
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
