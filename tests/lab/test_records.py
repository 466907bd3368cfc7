"""The demo's records (`lab.records`): CSV columns named with their units, rows that round-trip, and the
per-replica value the HPA compared with its target."""

from __future__ import annotations

import csv
import dataclasses
import io
import re

import pytest

from lab.records import CSV_COLUMNS, Tick, csv_header, from_row, per_replica, to_row
from tests.lab.demo.ticks import GAP_RUN, RUN, tick

# A column ends in its unit, or is one of these, with the reason it has none.
_UNITS = re.compile(r"_(seconds|per_second|fraction|requests|replicas|messages|consumers)$")
_UNITLESS = {
    "stage": "a name",
    "metric_total": "the HPA metric's own unit (its name is in summary.json's settings)",
    "metric_per_replica": "the HPA metric's own unit",
    "metric_target": "the HPA metric's own unit (summary.json's target_unit: req/s for the forecast)",
}


def test_every_column_names_its_unit() -> None:
    """Every `Tick` field, including any added later, has a CSV column whose name carries its unit
    (`ttft_p90_seconds`, `kv_usage_fraction`), so seconds are never mistaken for milliseconds."""
    header = csv_header()
    assert len(header) == len(set(header)) == len(dataclasses.fields(Tick))
    for column in header:
        assert _UNITS.search(column) or column in _UNITLESS, f"CSV column {column!r} does not say its unit"
    assert {"ttft_p90_seconds", "tpot_p90_seconds", "tpot_mean_seconds", "existing_replicas"} <= set(header)
    assert {"queue_depth_messages", "dlq_depth_messages", "queue_consumers", "lost_messages"} <= set(header)


def test_the_metric_columns_say_total_or_per_replica() -> None:
    """`metric` is the fleet total the HPA read; the per-replica value has its own column: no column is
    called plain `metric`, whose meaning a reader would have to guess."""
    assert CSV_COLUMNS["metric"] == "metric_total"
    assert CSV_COLUMNS["metric_per_replica"] == "metric_per_replica"
    assert "metric" not in csv_header()


def _round_trip(ticks: list[Tick]) -> list[Tick]:
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(csv_header())
    writer.writerows(to_row(s) for s in ticks)
    return [from_row(row) for row in csv.DictReader(io.StringIO(text.getvalue()))]


def test_rows_round_trip_and_unknowns_stay_unknown() -> None:
    """A tick written and read back is the same tick: `None` is an empty cell, never a 0."""
    queued = dataclasses.replace(RUN[1], queue_depth=120, dlq_depth=0, consumers=2, messages_lost=0)
    ticks = [*RUN, *GAP_RUN, dataclasses.replace(RUN[1], tpot_mean=0.031, metric_per_replica=12.4), queued]
    assert _round_trip(ticks) == ticks
    cells = dict(zip(csv_header(), to_row(GAP_RUN[1]), strict=True))
    assert cells["waiting_requests"] == cells["kv_usage_fraction"] == cells["metric_total"] == ""
    assert cells["ready_replicas"] == "0"


def test_a_csv_without_an_optional_column_reads_it_as_unknown() -> None:
    """A CSV from before `tpot_mean` existed still reads; a missing required column is named."""
    row = dict(zip(csv_header(), to_row(RUN[1]), strict=True))
    del row["tpot_mean_seconds"]
    assert from_row(row).tpot_mean is None
    del row["existing_replicas"]
    with pytest.raises(ValueError, match="'existing_replicas'"):
        from_row(row)


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [
        pytest.param(
            dict(metric=99.2, replicas=8, ready=4, metric_per_replica=None),
            12.4,
            id="total over existing replicas",
        ),
        pytest.param(
            dict(metric=29.0, replicas=3, metric_per_replica=29.0), 29.0, id="the HPA's own value wins"
        ),
        pytest.param(dict(metric=None, replicas=3), None, id="unknown metric"),
        pytest.param(dict(metric=5.0, replicas=0, ready=0), 5.0, id="no replica: the total"),
    ],
)
def test_per_replica(recorded: dict[str, object], expected: float | None) -> None:
    """The per-replica value is what the HPA recorded when known, else the total over the replicas that
    exist (loading ones included, as `status.replicas` counts them)."""
    value = per_replica(dataclasses.replace(tick(60, 3), **recorded))  # type: ignore[arg-type]
    assert value == (None if expected is None else pytest.approx(expected))


def test_loading_is_existing_minus_ready() -> None:
    assert tick(60, 8, ready=4).loading == 4
    assert tick(60, 2, ready=2).loading == 0
