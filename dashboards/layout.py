"""Dashboards as a whole: where each is published, variables, links, rows laid out on the grid, and the
shell shared by all five.

A dashboard module describes itself as rows (`Row`, one function each) of sized panels; `build`
lays them out with `Grid`, so ids are stable (1, 2, ... in definition order) and panels never
overlap. grafanalib 0.7.1 writes legacy variables; `Variable` emits the Grafana 8+ form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import attr
from grafanalib import core

from alerts.contract import RUNBOOK_URL
from dashboards.panels import DATASOURCE, Dashboard, Panel, Placed
from dashboards.queries import vllm_engine
from dashboards.queries.grafana import Query

#: Grafana 11.6/12.0 write this version; the two later migrations (42: hidden-field tooltips, 43:
#: formatTime transformations) touch nothing these dashboards use, so newer Grafanas import them as is.
SCHEMA_VERSION: Final = 41

TAGS: Final = ["vllm-autoscale", "vllm"]


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
DISAGGREGATED: Final = Board("vllm-prefill-decode", "vLLM / Prefill and decode", "vllm-prefill-decode.json")
BOARDS: Final = (OVERVIEW, AUTOSCALING, KV_LATENCY, GPU, ADAPTER, DISAGGREGATED)


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

    def lay_out(self, rows: Sequence[Row]) -> list[Panel]:
        """Each row's title, then its panels left to right; the panels with ids and positions."""
        for row in rows:
            self.row(row.title, repeat=row.repeat)
            for placed in row.panels:
                self.add(placed.panel, placed.width, placed.height)
        return self.panels()


@dataclass(frozen=True)
class Row:
    """A titled row of panels; with `repeat`, Grafana repeats it once per value of that variable."""

    title: str
    panels: Sequence[Placed]
    repeat: str | None = None


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


@dataclass(frozen=True)
class TextVariable:
    """A free-text variable (Grafana's `textbox`), for a number only the viewer knows."""

    name: str
    label: str
    default: str
    description: str

    def to_json_data(self) -> dict[str, Any]:
        current = {"selected": True, "text": self.default, "value": self.default}
        return {
            "name": self.name,
            "label": self.label,
            "description": self.description,
            "type": "textbox",
            "query": self.default,
            "current": current,
            "options": [current],
            "hide": 0,
        }


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
        query_variable("namespace", "Namespace", vllm_engine.namespace_variable()),
        query_variable("model", "Model", vllm_engine.model_variable()),
        query_variable("pod", "Pod", vllm_engine.pod_variable()),
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
    variables: Sequence[Variable | TextVariable],
    rows: Sequence[Row],
    annotations: Sequence[dict[str, Any]] = (),
) -> Dashboard:
    """The dashboard of `rows`, in the shell shared by all five: variables, links, annotations, time
    and refresh."""
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
        description=(
            f"{description} Generated by `make generate` from dashboards/{source_module}.py; do not "
            "edit the JSON."
        ),
        tags=TAGS,
        panels=Grid().lay_out(rows),
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
