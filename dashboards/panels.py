"""Shared building blocks: panels, variables, links, layout and the dashboard shell.

Every panel made here queries the `$datasource` variable, carries a unit, thresholds and a
description, and gets its id and grid position from `Grid`, so ids are stable (1, 2, ... in
definition order) and panels never overlap. grafanalib 0.7.1 predates several Grafana 8+ fields;
where it emits legacy ones that change behaviour (targets, variables), a small wrapper here emits
the modern form (grafanalib's writer serialises anything with a `to_json_data`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import attr
from grafanalib import core

from dashboards import queries
from dashboards.queries import ALERT_DEFAULTS, Histogram, Query, mean, quantile

#: Grafana 11.6/12.0 write this version; the two later migrations (42: hidden-field tooltips, 43:
#: formatTime transformations) touch nothing these dashboards use, so newer Grafanas import them as is.
SCHEMA_VERSION: Final = 41

#: every query goes to the data source the viewer picks, never to a hard-coded uid
DATASOURCE: Final = {"type": "prometheus", "uid": "${datasource}"}

RUNBOOK_URL: Final = "https://github.com/vllm-autoscale/vllm-autoscale/blob/main/alerts/runbook.md"

TAGS: Final = ["vllm-autoscale", "vllm"]

# Grafana unit ids (built-in, or the documented `count:<unit>` custom form, which scales with K/M).
SECONDS: Final = "s"
RATIO: Final = "percentunit"
REQUESTS_PER_SECOND: Final = "reqps"
TOKENS_PER_SECOND: Final = "count:tokens/s"
PER_SECOND: Final = "count:/s"
COUNT: Final = "short"
PERCENT: Final = "percent"
CELSIUS: Final = "celsius"
WATTS: Final = "watt"
MEBIBYTES: Final = "mbytes"
CODE: Final = "none"

Thresholds = list[dict[str, Any]]


def thresholds(*steps: tuple[float, str], base: str = "green") -> Thresholds:
    """Absolute threshold steps: the base colour below the first value, then each (value, colour)."""
    return [{"color": base, "value": None}, *({"color": color, "value": value} for value, color in steps)]


#: a panel whose values have no good or bad level still declares its (single) base colour
NO_THRESHOLD: Final = thresholds(base="blue")

#: grafanalib ships no type information: its panels and dashboards are `Any` to mypy
Panel: TypeAlias = Any
Dashboard: TypeAlias = Any

#: Grafana unit per catalogue unit; a new catalogue unit fails generation until it is mapped here
CATALOGUE_UNITS: Final = {"requests": COUNT, "ratio": RATIO, "seconds": SECONDS}

# Levels shared by several panels, in the metric's own unit. Where an alert watches the value, its
# default threshold is a level, so the line on the graph is where the page or ticket starts.
#: orange where the alert fires; red at ~0.95, where a real server was already preempting
KV_LEVELS: Final = thresholds((ALERT_DEFAULTS.kv_cache_usage_threshold, "orange"), (0.95, "red"))
#: red at the TTFT SLO, orange at half of it
TTFT_LEVELS: Final = thresholds(
    (ALERT_DEFAULTS.ttft_slo_seconds / 2, "orange"), (ALERT_DEFAULTS.ttft_slo_seconds, "red")
)
#: ~50 ms per token (~20 tokens/s) is where streamed text starts to read slower than people do
TPOT_LEVELS: Final = thresholds((0.05, "orange"), (0.1, "red"))
TPOT_DRIFT_LEVELS: Final = thresholds(
    (ALERT_DEFAULTS.tpot_ticket_ratio, "orange"), (ALERT_DEFAULTS.tpot_page_ratio, "red")
)
#: queueing beyond a second means the fleet is short of capacity (TTFT jumps by orders of magnitude)
QUEUE_LEVELS: Final = thresholds((1.0, "orange"), (5.0, "red"))
FAILED_LEVELS: Final = thresholds((0.01, "orange"), (0.05, "red"))
#: the preemption and rejection alerts fire on any sustained rate above zero
ANY_LEVELS: Final = thresholds((0.001, "orange"))
QUEUE_BACKLOG_LEVELS: Final = thresholds((ALERT_DEFAULTS.queue_backlog_threshold, "orange"))
DLQ_LEVELS: Final = thresholds((1, "orange"), (ALERT_DEFAULTS.dlq_depth_threshold, "red"))


@dataclass(frozen=True)
class Board:
    """Where a dashboard lives: the links between dashboards are built from these."""

    uid: str
    title: str
    filename: str
    #: whether the namespace/model/pod variables mean vLLM workloads (the adapter's do not)
    vllm_scoped: bool = True


OVERVIEW: Final = Board("vllm-serving-overview", "vLLM / Serving overview", "vllm-serving-overview.json")
AUTOSCALING: Final = Board("vllm-autoscaling", "vLLM / Autoscaling", "vllm-autoscaling.json")
KV_LATENCY: Final = Board(
    "vllm-kv-cache-latency", "vLLM / KV cache and latency", "vllm-kv-cache-latency.json"
)
GPU: Final = Board("vllm-gpu", "vLLM / GPU", "vllm-gpu.json")
ADAPTER: Final = Board(
    "vllm-autoscale-adapter",
    "vLLM / Autoscale adapter health",
    "vllm-autoscale-adapter.json",
    vllm_scoped=False,
)
BOARDS: Final = (OVERVIEW, AUTOSCALING, KV_LATENCY, GPU, ADAPTER)


@dataclass(frozen=True)
class PromTarget:
    """A Prometheus query in Grafana 8+ form.

    grafanalib's Target also writes `intervalFactor: 2`, which Grafana still honours by halving the
    resolution, and Graphite-era fields; this writes only what the Prometheus data source reads.
    """

    expr: str
    legend: str
    ref_id: str
    instant: bool
    table: bool

    def to_json_data(self) -> dict[str, Any]:
        return {
            "datasource": DATASOURCE,
            "editorMode": "code",
            "expr": self.expr,
            "format": core.TABLE_TARGET_FORMAT if self.table else core.TIME_SERIES_TARGET_FORMAT,
            "instant": self.instant,
            "legendFormat": self.legend,
            "range": not self.instant,
            "refId": self.ref_id,
        }


def targets(queries: Sequence[Query]) -> list[PromTarget]:
    """Targets A, B, C, ... for the queries."""
    return [
        PromTarget(q.expr, q.legend, chr(ord("A") + i), q.instant, q.table) for i, q in enumerate(queries)
    ]


def runbook(alert: str = "") -> dict[str, Any]:
    """A panel link to the runbook, or to the section of the alert watching what the panel shows
    (GitHub anchors a heading by its lower-cased text)."""
    if not alert:
        return {"title": "Runbook", "url": RUNBOOK_URL, "targetBlank": True}
    return {"title": f"Runbook: {alert}", "url": f"{RUNBOOK_URL}#{alert.lower()}", "targetBlank": True}


def _panel_common(
    title: str, description: str, queries: Sequence[Query], links: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    if not description:
        raise ValueError(f"panel {title!r} must have a description")
    return {
        "title": title,
        "description": description,
        "dataSource": DATASOURCE,
        "targets": targets(queries),
        "links": list(links),
        "maxDataPoints": None,
    }


def timeseries(
    title: str,
    description: str,
    queries: Sequence[Query],
    unit: str,
    steps: Thresholds = NO_THRESHOLD,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    stacked: bool = False,
    bars: bool = False,
    links: Sequence[dict[str, Any]] = (),
) -> Panel:
    """A time series; thresholds, when there are any, are drawn as dashed lines."""
    return core.TimeSeries(
        **_panel_common(title, description, queries, links),
        unit=unit,
        thresholds=steps,
        thresholdsStyleMode="dashed" if len(steps) > 1 else "off",
        valueMin=minimum,
        valueMax=maximum,
        stacking={"mode": "normal", "group": "A"} if stacked else {"mode": "none", "group": "A"},
        drawStyle="bars" if bars else "line",
        fillOpacity=60 if bars else (20 if stacked else 0),
        lineWidth=1,
        showPoints="never",
        spanNulls=False,
        tooltipMode="multi",
        tooltipSort="desc",
        legendDisplayMode="table",
        legendPlacement="bottom",
        legendCalcs=["mean", "max", "lastNotNull"],
    )


def latency(title: str, h: Histogram, levels: Thresholds, what: str, alert: str = "") -> Panel:
    """Mean and p50/p90/p99 of a latency histogram per model; quantiles only where resolved."""
    return timeseries(
        title,
        f"{what} Mean (Δsum/Δcount) always; p50/p90/p99 only where they land between the first "
        f"({h.buckets[0]:g} s) and last finite ({h.buckets[-1]:g} s) bucket bounds, since there "
        "histogram_quantile interpolates from nothing: a gap in a quantile line means unresolved, not zero.",
        [mean(h), *(quantile(h, x) for x in (0.5, 0.9, 0.99))],
        SECONDS,
        levels,
        minimum=0,
        links=[runbook(alert)],
    )


def stat(
    title: str,
    description: str,
    queries: Sequence[Query],
    unit: str,
    steps: Thresholds = NO_THRESHOLD,
    *,
    no_value: str = "No data",
    links: Sequence[dict[str, Any]] = (),
) -> Panel:
    """A single number (the last value), coloured by its thresholds."""
    return core.Stat(
        **_panel_common(title, description, queries, links),
        format=unit,
        thresholds=steps,
        color={"mode": "thresholds"},
        colorMode="value",
        graphMode="area",
        reduceCalc="lastNotNull",
        noValue=no_value,
        textMode="value_and_name" if len(queries) > 1 else "auto",
    )


def table(
    title: str,
    description: str,
    queries: Sequence[Query],
    unit: str,
    steps: Thresholds = NO_THRESHOLD,
    *,
    hide_columns: Sequence[str] = ("Time", "Value"),
    links: Sequence[dict[str, Any]] = (),
) -> Panel:
    """A table of label sets (instant, table-format queries); the time and value columns hidden."""
    return core.Table(
        **_panel_common(title, description, queries, links),
        unit=unit,
        thresholds=steps,
        transformations=[
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": {column: True for column in hide_columns}}},
        ],
    )


class Grid:
    """Lays panels out left to right in rows of 24 columns and numbers them in order."""

    WIDTH: Final = 24

    def __init__(self) -> None:
        self._panels: list[tuple[Panel, core.GridPos]] = []
        self._x = 0
        self._y = 0
        self._line_height = 0

    def _newline(self) -> None:
        self._y += self._line_height
        self._x = 0
        self._line_height = 0

    def row(self, title: str, *, repeat: str | None = None) -> None:
        """Start a new (expanded) row; with `repeat`, Grafana repeats the row once per variable value."""
        self._newline()
        panel = core.RowPanel(title=title, dataSource=DATASOURCE, repeat=core.Repeat(variable=repeat))
        self._panels.append((panel, core.GridPos(h=1, w=self.WIDTH, x=0, y=self._y)))
        self._y += 1

    def add(self, panel: Panel, width: int, height: int = 8) -> None:
        """Place a panel to the right of the previous one, wrapping when the row is full."""
        if not 0 < width <= self.WIDTH:
            raise ValueError(f"panel width {width!r} must be between 1 and {self.WIDTH}")
        if self._x + width > self.WIDTH:
            self._newline()
        self._panels.append((panel, core.GridPos(h=height, w=width, x=self._x, y=self._y)))
        self._x += width
        self._line_height = max(self._line_height, height)

    def panels(self) -> list[Panel]:
        """The panels with stable ids (1..n in the order they were added) and their positions."""
        return [
            attr.evolve(panel, id=index, gridPos=pos) for index, (panel, pos) in enumerate(self._panels, 1)
        ]


@dataclass(frozen=True)
class Variable:
    """A template variable in Grafana 8+ form: `definition` shown in the editor, and "All" preselected."""

    template: Any  # a grafanalib core.Template

    def to_json_data(self) -> dict[str, Any]:
        data: dict[str, Any] = self.template.to_json_data()
        if data["type"] == "query":
            data["definition"] = data["query"]
            data["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
        return data


def datasource_variable() -> Variable:
    """`$datasource`: any Prometheus-compatible data source (Prometheus, Thanos, Mimir, ...)."""
    return Variable(
        core.Template(
            name="datasource", label="Data source", query="prometheus", type="datasource", regex="", refresh=1
        )
    )


def query_variable(name: str, label: str, query: Query) -> Variable:
    """A multi-select variable from a `label_values(...)` query, "All" meaning the regex `.*`.

    `.*` rather than Grafana's default (every current value OR-ed): a pod that appears after the
    dashboard loaded is still included, and the query stays short on a large fleet.
    """
    return Variable(
        core.Template(
            name=name,
            label=label,
            query=query.expr,
            dataSource=DATASOURCE,
            includeAll=True,
            multi=True,
            allValue=".*",
            regex="",
            refresh=core.REFRESH_ON_TIME_RANGE_CHANGE,
            sort=core.SORT_ALPHA_ASC,
        )
    )


def serving_variables() -> list[Variable]:
    """The namespace, model and pod variables every vLLM-facing dashboard filters by."""
    return [
        query_variable("namespace", "Namespace", queries.namespace_variable()),
        query_variable("model", "Model", queries.model_variable()),
        query_variable("pod", "Pod", queries.pod_variable()),
    ]


def _links(this: Board) -> list[core.DashboardLink]:
    links = [
        core.DashboardLink(
            type="link",
            title=board.title.removeprefix("vLLM / "),
            uri=f"/d/{board.uid}",
            icon="dashboard",
            # Only the vLLM dashboards share the meaning of namespace/model/pod.
            includeVars=this.vllm_scoped and board.vllm_scoped,
            keepTime=True,
        )
        for board in BOARDS
        if board != this
    ]
    links.append(
        core.DashboardLink(
            type="link", title="Runbook", uri=RUNBOOK_URL, icon="doc", targetBlank=True, keepTime=False
        )
    )
    return links


def build(
    board: Board,
    description: str,
    source_module: str,
    variables: Sequence[Variable],
    grid: Grid,
    annotations: Sequence[dict[str, Any]] = (),
) -> Dashboard:
    """The dashboard shell shared by all five: variables, links, annotations, time and refresh."""
    builtin_annotation = {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }
    return core.Dashboard(
        title=board.title,
        uid=board.uid,
        description=f"{description} Generated by `make generate` from dashboards/{source_module}.py; do not edit the JSON.",
        tags=TAGS,
        panels=grid.panels(),
        templating=core.Templating(list=[datasource_variable(), *variables]),
        annotations=core.Annotations(list=[builtin_annotation, *annotations]),
        links=_links(board),
        schemaVersion=SCHEMA_VERSION,
        graphTooltip=core.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
        refresh="30s",
        time=core.Time("now-1h", "now"),
        timezone="browser",
        editable=True,
    )
