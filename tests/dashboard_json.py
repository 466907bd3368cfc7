"""Reading the committed dashboard JSON as Grafana would: files, panels (rows' nested ones included),
query expressions. Shared by the dashboard tests and the real-Prometheus dashboard query tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dashboards import layout

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "dashboards"
FILES = sorted(board.filename for board in layout.BOARDS)


def load(name: str) -> dict[str, Any]:
    """A committed dashboard, parsed."""
    document: dict[str, Any] = json.loads((DASHBOARDS / name).read_text())
    return document


def all_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows included, and the panels a collapsed row holds."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def data_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """The panels that query (every panel but rows)."""
    return [panel for panel in all_panels(dashboard) if panel["type"] != "row"]


def exprs(dashboard: dict[str, Any]) -> list[str]:
    """Every panel target's PromQL."""
    return [target["expr"] for panel in data_panels(dashboard) for target in panel["targets"]]
