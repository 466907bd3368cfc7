"""The files a demo run leaves in `--out`: one CSV row per tick, the PNG and the summary (JSON and text)."""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from lab.demo.figure import plot
from lab.demo.records import RequestRecord, Tick
from lab.demo.summary import Slo, Summary, summarize

CSV_NAME: Final = "demo.csv"
PNG_NAME: Final = "demo.png"
SUMMARY_NAME: Final = "summary.json"
SUMMARY_TEXT_NAME: Final = "summary.txt"


def write_csv(path: Path, ticks: Sequence[Tick]) -> None:
    """One row per tick; empty cells for missing values."""
    names = [f.name for f in dataclasses.fields(Tick)]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        for tick in ticks:
            writer.writerow(["" if getattr(tick, n) is None else _cell(getattr(tick, n)) for n in names])


def _cell(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def read_csv(path: Path) -> list[Tick]:
    """The ticks of a CSV written by `write_csv`."""
    types = {f.name: f.type for f in dataclasses.fields(Tick)}
    ticks = []
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            values: dict[str, Any] = {}
            for name, kind in types.items():
                cell = row[name]
                if kind == "str":
                    values[name] = cell
                elif cell == "":
                    values[name] = None
                else:
                    values[name] = int(cell) if kind.startswith("int") else float(cell)
            ticks.append(Tick(**values))
    return ticks


def write_report(
    out: Path,
    ticks: Sequence[Tick],
    requests: Sequence[RequestRecord],
    *,
    slo: Slo | None = None,
    title: str = "vllm-autoscale demo",
    target: float | None = None,
    settings: dict[str, Any] | None = None,
) -> Summary:
    """Write CSV, PNG and summary (JSON and text) into `out`; returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(ticks, requests, slo)
    write_csv(out / CSV_NAME, ticks)
    plot(out / PNG_NAME, ticks, title=title, target=target)
    document = {"summary": dataclasses.asdict(summary), "settings": settings or {}}
    (out / SUMMARY_NAME).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / SUMMARY_TEXT_NAME).write_text(summary.text() + "\n", encoding="utf-8")
    return summary
