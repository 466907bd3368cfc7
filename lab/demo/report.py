"""The files a demo run leaves in `--out`: one CSV row per tick, the PNG and the summary (JSON and text)."""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from lab import json_out
from lab.demo.decision.comparison import Comparison
from lab.demo.figure import FigureContext, plot
from lab.demo.summary import Summary, UpstreamFacts, summarize
from lab.records import RequestRecord, Tick, csv_header, from_row, to_row
from lab.slo import Slo

CSV_NAME: Final = "demo.csv"
PNG_NAME: Final = "demo.png"
SUMMARY_NAME: Final = "summary.json"
SUMMARY_TEXT_NAME: Final = "summary.txt"


def write_csv(path: Path, ticks: Sequence[Tick]) -> None:
    """One row per tick under `records.csv_header()` (columns named with their units); empty cells for
    missing values."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(csv_header())
        writer.writerows(to_row(tick) for tick in ticks)


def read_csv(path: Path) -> list[Tick]:
    """The ticks of a CSV written by `write_csv`."""
    with path.open(newline="", encoding="utf-8") as handle:
        return [from_row(row) for row in csv.DictReader(handle)]


def write_report(
    out: Path,
    ticks: Sequence[Tick],
    requests: Sequence[RequestRecord],
    *,
    slo: Slo | None = None,
    title: str = "vllm-autoscale demo",
    target: float | None = None,
    settings: dict[str, Any] | None = None,
    upstream: UpstreamFacts | None = None,
    policy: str = "",
    comparison: Comparison | None = None,
) -> Summary:
    """Write CSV, PNG and summary (JSON and text) into `out`; returns the summary (with the queue's
    part when `upstream` is given).

    The picture takes the HPA's metric, target type, tolerance, maximum and the capacity of one replica
    from `settings` (the runner's `describe()`), where present.
    """
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(ticks, requests, slo, upstream, policy=policy, comparison=comparison)
    write_csv(out / CSV_NAME, ticks)
    plot(out / PNG_NAME, ticks, figure_context(summary, title=title, target=target, settings=settings or {}))
    # The picture's title beside the summary, so that a reader (and a test) can hold the two to one number.
    document = {"summary": dataclasses.asdict(summary), "settings": settings or {}, "title": title}
    (out / SUMMARY_NAME).write_text(json_out.text(document, sort_keys=True), encoding="utf-8")
    (out / SUMMARY_TEXT_NAME).write_text(summary.text() + "\n", encoding="utf-8")
    return summary


def figure_context(
    summary: Summary, *, title: str, target: float | None, settings: Mapping[str, Any]
) -> FigureContext:
    """What the picture shows besides the ticks, from the summary and the run's settings."""
    target_type = str(settings.get("target_type", "AverageValue"))
    if target is None and settings.get("target") is not None:
        target = float(settings["target"])
    return FigureContext(
        title=title,
        slo=summary.slo,
        summary=summary,
        capacity=_number(settings.get("capacity_rps_per_replica")),
        metric=str(settings.get("metric", "metric")),
        target_type=target_type,
        target=target,
        tolerance=_number(settings.get("tolerance")),
        max_replicas=int(settings["max_replicas"]) if "max_replicas" in settings else None,
    )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None
