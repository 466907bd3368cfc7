"""The autoscaling dashboard's `vllm_saturation` panel: the adapter's query, the knee at 1.0.

No series carries the adapter's configuration, so the panel takes capacity, kv_target and
queue_target from text variables; with them set to a configuration's numbers it is exactly the query
the adapter sends for that configuration. The query is also run against a real Prometheus in
tests/integration/test_dashboard_queries.py, like every panel's.
"""

from __future__ import annotations

from typing import Any

from adapter.vocabulary import catalogue
from adapter.vocabulary.exporters import HPA_TARGET
from adapter.vocabulary.promql.catalogue import value_query
from dashboards import layout
from dashboards.queries import vllm_engine
from dashboards.queries.grafana import BY_POD
from tests.dashboard_json import data_panels, load

TITLE = "vllm_saturation ($model)"


def panel() -> dict[str, Any]:
    (found,) = [p for p in data_panels(load(layout.AUTOSCALING.filename)) if p["title"] == TITLE]
    return found


def with_variables(expr: str, capacity: str, kv_target: str, queue_target: str) -> str:
    return (
        expr.replace("$capacity", capacity)
        .replace("$kv_target", kv_target)
        .replace("$queue_target", queue_target)
    )


def test_the_panel_is_the_adapters_query_with_the_variables_as_parameters() -> None:
    """Variables set to 48 / 0.9 / 4 give `value_query` of vllm_saturation configured so, for an HPA
    selecting the model; per pod it is the same query grouped by pod."""
    fleet, per_pod, target = (t["expr"] for t in panel()["targets"])
    configured = catalogue.saturation(48, 0.9, 4)
    assert with_variables(fleet, "48", "0.9", "4") == value_query(configured, vllm_engine.HPA_VIEW)
    assert with_variables(per_pod, "48", "0.9", "4") == value_query(
        configured, vllm_engine.HPA_VIEW, by=BY_POD
    )
    assert HPA_TARGET in target and f'metric_name=~"(s[0-9]+-)?{catalogue.SATURATION}"' in target


def test_inf_leaves_a_term_out_as_an_unset_key_does() -> None:
    """The defaults (`Inf`) divide KV and the queue by infinity: those terms are 0 and never the
    largest, which is what the adapter computes when kv_target and queue_target are not configured."""
    variables = {v["name"]: v for v in load(layout.AUTOSCALING.filename)["templating"]["list"]}
    assert (variables["kv_target"]["query"], variables["queue_target"]["query"]) == ("Inf", "Inf")
    # a capacity is never a default: NaN draws no line, and keeps the query valid PromQL
    assert variables["capacity"]["query"] == "NaN"
    fleet = panel()["targets"][0]["expr"]
    assert '"kv", "", "") or label_replace(' in fleet and " / $kv_target, " in fleet
    assert " / $queue_target, " in fleet and " / $capacity, " in fleet


def test_the_knee_is_drawn_at_one() -> None:
    """A dashed red threshold line at 1.0, in a plain (not percent) unit, the axis from 0."""
    defaults = panel()["fieldConfig"]["defaults"]
    assert defaults["unit"] == "none"
    assert defaults["thresholds"]["steps"][1:] == [{"color": "red", "value": 1.0}]
    assert defaults["custom"]["thresholdsStyle"] == {"mode": "dashed"}
    assert defaults["min"] == 0


def test_the_panel_sits_in_the_row_repeated_per_model() -> None:
    """Beside the other metrics the HPA sees, in the row Grafana repeats for each model."""
    panels = load(layout.AUTOSCALING.filename)["panels"]
    rows = [i for i, p in enumerate(panels) if p["type"] == "row"]
    index = next(i for i, p in enumerate(panels) if p.get("title") == TITLE)
    row = panels[max(r for r in rows if r < index)]
    assert row["repeat"] == "model"
