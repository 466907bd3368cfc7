"""Panels: units, threshold levels, query targets, runbook links, and the panel kinds the dashboards use.

Every panel made here queries the `$datasource` variable and carries a unit, thresholds and a
description. grafanalib 0.7.1 predates several Grafana 8+ fields; where it emits legacy ones that
change behaviour (targets), a small wrapper here emits the modern form (grafanalib's writer
serialises anything with a `to_json_data`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, TypeAlias

from grafanalib import core

from alerts.contract import runbook_url
from alerts.params import Params
from dashboards.queries.grafana import Query
from dashboards.queries.vllm_engine import E2E, TTFT, HistogramFamily, mean, quantile

#: every query goes to the data source the viewer picks, never to a hard-coded uid
DATASOURCE: Final = {"type": "prometheus", "uid": "${datasource}"}

#: the alerts' default thresholds: a panel's threshold line sits where its alert fires
ALERT_DEFAULTS: Final = Params()

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
#: a plain number without unit (saturation: 1.0 is the knee)
PLAIN: Final = "none"

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
GATEWAY_QUEUE_LEVELS: Final = thresholds((ALERT_DEFAULTS.gateway_queue_threshold, "red"))
DLQ_LEVELS: Final = thresholds((1, "orange"), (ALERT_DEFAULTS.dlq_depth_threshold, "red"))
#: 1.0 is the knee `vllm-autoscale profile` measured: past it the SLO no longer holds
SATURATION_LEVELS: Final = thresholds((1.0, "red"))


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
    """A panel link to the runbook, or to the section of the alert watching what the panel shows."""
    title = f"Runbook: {alert}" if alert else "Runbook"
    return {"title": title, "url": runbook_url(alert), "targetBlank": True}


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


class Placed(NamedTuple):
    """A panel and the grid cells it takes (24 columns make a line)."""

    panel: Panel
    width: int
    height: int = 8


def timeseries(
    title: str,
    description: str,
    queries: Sequence[Query],
    unit: str,
    steps: Thresholds = NO_THRESHOLD,
    *,
    width: int,
    height: int = 8,
    minimum: int | None = 0,
    maximum: int | None = None,
    stacked: bool = False,
    bars: bool = False,
    links: Sequence[dict[str, Any]] = (),
) -> Placed:
    """A time series, `width` columns wide; thresholds, when there are any, are drawn as dashed lines.
    Every value charted here is non-negative, so the axis starts at 0 unless `minimum` says otherwise."""
    panel = core.TimeSeries(
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
    return Placed(panel, width, height)


def latency(
    title: str, h: HistogramFamily, levels: Thresholds, what: str, alert: str = "", *, width: int
) -> Placed:
    """Mean and p50/p90/p99 of a latency histogram per model; quantiles only where resolved."""
    return timeseries(
        title,
        f"{what} Mean (Δsum/Δcount) always; p50/p90/p99 only where they land between the first "
        f"({h.buckets[0]:g} s) and last finite ({h.buckets[-1]:g} s) bucket bounds, since there "
        "histogram_quantile interpolates from nothing: a gap in a quantile line means unresolved, not zero.",
        [mean(h), *(quantile(h, x) for x in (0.5, 0.9, 0.99))],
        SECONDS,
        levels,
        width=width,
        links=[runbook(alert)],
    )


def ttft_latency(*, width: int) -> Placed:
    """Time to first token, as every dashboard that shows it shows it."""
    what = "Arrival to first token, queueing included."
    return latency("Time to first token", TTFT, TTFT_LEVELS, what, "VLLMTTFTHigh", width=width)


def e2e_latency(*, width: int) -> Placed:
    """End-to-end latency, as every dashboard that shows it shows it."""
    return latency("End-to-end latency", E2E, NO_THRESHOLD, "Arrival to last token.", width=width)


def stat(
    title: str,
    description: str,
    queries: Sequence[Query],
    unit: str,
    steps: Thresholds = NO_THRESHOLD,
    *,
    width: int,
    height: int = 4,
    no_value: str = "No data",
    links: Sequence[dict[str, Any]] = (),
) -> Placed:
    """A single number (the last value), coloured by its thresholds; `height` 4 fits a line of numbers."""
    panel = core.Stat(
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
    return Placed(panel, width, height)


def table(
    title: str,
    description: str,
    queries: Sequence[Query],
    unit: str,
    steps: Thresholds = NO_THRESHOLD,
    *,
    width: int,
    height: int = 8,
    hide_columns: Sequence[str] = ("Time", "Value"),
    links: Sequence[dict[str, Any]] = (),
) -> Placed:
    """A table of label sets (instant, table-format queries); the time and value columns hidden."""
    panel = core.Table(
        **_panel_common(title, description, queries, links),
        unit=unit,
        thresholds=steps,
        transformations=[
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": {column: True for column in hide_columns}}},
        ],
    )
    return Placed(panel, width, height)
