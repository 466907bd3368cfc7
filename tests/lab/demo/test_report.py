"""The demo's report: summary arithmetic and text (`summary`) and the files a run leaves (`report`).

The picture has `test_figure.py`, the CSV columns `test_records.py`, the live view `test_view.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import pytest

from lab.demo.figure import DPI, HEADER_INCHES, PANEL_INCHES, WIDTH_INCHES
from lab.demo.report import (
    CSV_NAME,
    PNG_NAME,
    SUMMARY_NAME,
    SUMMARY_TEXT_NAME,
    figure_context,
    read_csv,
    write_report,
)
from lab.demo.summary import duration, quantile_of, summarize
from lab.records import RequestRecord
from lab.slo import Slo
from tests.lab.demo.ticks import GAP_RUN, RUN, gap


def test_replica_minutes_hold_each_count_until_the_next_tick() -> None:
    """Replica-minutes integrate the existing replicas (loading ones cost a GPU too) as a step function:
    1x60 + 3x60 + 5x60 + 2x60 seconds = 11 minutes."""
    summary = summarize(RUN, [])
    assert summary.replica_minutes == pytest.approx(11.0)
    assert summary.duration == 240
    assert (summary.peak_replicas, summary.min_replicas_after_peak) == (5, 2)
    assert summary.peak_queue == 40


@pytest.mark.parametrize(
    ("requests", "attainment"),
    [
        pytest.param([RequestRecord(0, "ok", 0.1, 0.01)] * 3, 1.0, id="all within both bounds"),
        pytest.param(
            [RequestRecord(0, "ok", 0.1, 0.01), RequestRecord(0, "ok", 0.6, 0.01)],
            0.5,
            id="TTFT over the bound",
        ),
        pytest.param(
            [RequestRecord(0, "ok", 0.1, 0.01), RequestRecord(0, "ok", 0.1, 0.06)],
            0.5,
            id="TPOT over the bound",
        ),
        pytest.param(
            [RequestRecord(0, "ok", 0.1, 0.01), RequestRecord(0, "rejected")],
            0.5,
            id="a failed request counts against",
        ),
        pytest.param(
            [RequestRecord(0, "ok", 0.5, None)],
            1.0,
            id="bounds are inclusive; one-token requests have no TPOT",
        ),
        pytest.param([], 1.0, id="no requests, nothing missed"),
    ],
)
def test_slo_attainment(requests: list[RequestRecord], attainment: float) -> None:
    """SLO attainment is the share of sent requests that completed with TTFT <= 0.5 s and TPOT <= 50 ms."""
    summary = summarize(RUN, requests, Slo(ttft=0.5, tpot=0.05))
    assert summary.slo_attainment == pytest.approx(attainment)
    assert summary.failed == sum(1 for r in requests if r.outcome != "ok")


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        pytest.param([], 0.9, None, id="empty"),
        pytest.param([5.0], 0.9, 5.0, id="single value"),
        pytest.param([float(v) for v in range(1, 11)], 0.9, 9.1, id="interpolates between order statistics"),
        pytest.param([3.0, 1.0, 2.0], 0.5, 2.0, id="unsorted input"),
    ],
)
def test_quantile(values: list[float], q: float, expected: float | None) -> None:
    """Request-level quantiles interpolate linearly between order statistics (numpy's default method)."""
    assert quantile_of(values, q) == (None if expected is None else pytest.approx(expected))


SETTINGS = {
    "metric": "vllm_requests_inflight",
    "target_type": "AverageValue",
    "target": 12.0,
    "tolerance": 0.1,
    "max_replicas": 8,
    "capacity_rps_per_replica": 1.44,
}


def test_write_report_writes_csv_png_and_summary(tmp_path: Path) -> None:
    """The CSV round-trips every tick (missing values stay missing), the PNG is a real image of the
    configured size, and the summary exists as JSON (with the run's settings) and as text."""
    requests = [RequestRecord(1.0, "ok", 0.02, 0.002), RequestRecord(61.0, "ok", 2.5, 0.003)]
    summary = write_report(tmp_path / "out", RUN, requests, target=24.0, settings=SETTINGS)
    out = tmp_path / "out"
    assert read_csv(out / CSV_NAME) == RUN
    image = matplotlib.image.imread(out / PNG_NAME)
    height = round((HEADER_INCHES + 7 * PANEL_INCHES) * DPI)
    assert image.shape[:2] == (height, WIDTH_INCHES * DPI)
    assert image.std() > 0.05  # not a blank canvas
    document = json.loads((out / SUMMARY_NAME).read_text())
    assert document["settings"] == SETTINGS
    assert document["summary"]["slo_attainment"] == 0.5
    assert document["summary"]["replica_minutes"] == pytest.approx(summary.replica_minutes)
    text = (out / SUMMARY_TEXT_NAME).read_text()
    assert "SLO attainment  50.0%" in text
    assert "11.0 replica-minutes" in text


def test_the_picture_takes_the_hpa_and_the_capacity_from_the_settings() -> None:
    """The runner's settings give the picture its capacity line, target, tolerance band and maximum; the
    target passed explicitly wins, and a Value target is read from the settings."""
    summary = summarize(RUN, [])
    context = figure_context(summary, title="t", target=24.0, settings=SETTINGS)
    assert (context.capacity, context.target, context.tolerance, context.max_replicas) == (1.44, 24.0, 0.1, 8)
    assert context.per_replica and context.summary is summary and context.slo == summary.slo
    value = figure_context(
        summary, title="t", target=None, settings=SETTINGS | {"target_type": "Value", "target": 0.8}
    )
    assert (value.per_replica, value.target) == (False, 0.8)
    bare = figure_context(summary, title="t", target=None, settings={})
    assert (bare.capacity, bare.target, bare.max_replicas) == (None, None, None)


def test_gaps_stay_gaps_in_the_csv_and_the_summary(tmp_path: Path) -> None:
    """Unknown values are empty CSV cells and neither zeros in the summary nor hidden: the seconds without a
    Ready replica are reported."""
    summary = write_report(tmp_path, GAP_RUN, [])
    rows = (tmp_path / CSV_NAME).read_text().splitlines()
    header = rows[0].split(",")
    columns = (
        "waiting_requests",
        "running_requests",
        "kv_usage_fraction",
        "tpot_p90_seconds",
        "metric_total",
    )
    for row in rows[2:4]:
        cells = dict(zip(header, row.split(","), strict=True))
        assert [cells[k] for k in columns] == [""] * 5
    assert read_csv(tmp_path / CSV_NAME) == GAP_RUN
    assert summary.peak_queue == 9
    assert summary.no_ready_seconds == 120
    assert "120 s without a ready replica" in summary.text()


@pytest.mark.parametrize(
    ("seconds", "printed"),
    [
        pytest.param(None, "n/a", id="unknown"),
        pytest.param(0.0381, "38 ms", id="milliseconds"),
        pytest.param(9.4994, "9499 ms", id="below ten seconds"),
        pytest.param(64.1404, "64.1 s", id="a tail of a minute in seconds"),
    ],
)
def test_latencies_are_printed_to_a_precision_the_run_has(seconds: float | None, printed: str) -> None:
    """Milliseconds for what is measured in milliseconds; a minute-long tail in tenths of seconds."""
    assert duration(seconds) == printed


def test_summary_of_a_run_that_never_had_a_ready_replica() -> None:
    """With no known queue length at all, the peak queue is unknown, not 0."""
    summary = summarize([gap(0, 1), gap(60, 1)], [])
    assert summary.peak_queue is None
    assert "peak queue      n/a" in summary.text()
