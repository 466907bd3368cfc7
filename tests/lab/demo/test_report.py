"""The demo's report: summary arithmetic (`summary`), CSV round trip (`report`), the PNG (`figure`) and the live
view's rendering (`view`)."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pytest

from lab.demo.figure import figure
from lab.demo.records import RequestRecord, Tick
from lab.demo.report import CSV_NAME, PNG_NAME, SUMMARY_NAME, SUMMARY_TEXT_NAME, read_csv, write_report
from lab.demo.summary import Slo, quantile_of, summarize
from lab.demo.view import LiveView, render_line, render_panel


def tick(
    t: float, replicas: int, *, waiting: int = 0, stage: str = "idle", metric: float | None = 4.0
) -> Tick:
    return Tick(
        t=t,
        stage=stage,
        offered_rps=10.0,
        sent_rps=9.5,
        completed_rps=9.0,
        waiting=waiting,
        running=3,
        kv_usage=0.25,
        tpot_p90=0.0021 if t else None,
        ttft_p90=0.018,
        metric=metric,
        desired=replicas,
        ready=max(replicas - 1, 1),
        replicas=replicas,
    )


RUN = [
    tick(0, 1),
    tick(60, 3, waiting=40, stage="spike"),
    tick(120, 5, waiting=7, stage="spike", metric=None),
    tick(180, 2, stage="idle"),
    tick(240, 2, stage="idle"),
]


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


def test_write_report_writes_csv_png_and_summary(tmp_path: Path) -> None:
    """The CSV round-trips every tick (missing values stay missing), the PNG is a real image of the
    configured size, and the summary exists as JSON (with the run's settings) and as text."""
    requests = [RequestRecord(1.0, "ok", 0.02, 0.002), RequestRecord(61.0, "ok", 2.5, 0.003)]
    summary = write_report(
        tmp_path / "out", RUN, requests, target=24.0, settings={"metric": "vllm_requests_inflight"}
    )
    out = tmp_path / "out"
    assert read_csv(out / CSV_NAME) == RUN
    image = matplotlib.image.imread(out / PNG_NAME)
    assert image.shape[:2] == (1000, 1100)
    assert image.std() > 0.05  # not a blank canvas
    document = json.loads((out / SUMMARY_NAME).read_text())
    assert document["settings"] == {"metric": "vllm_requests_inflight"}
    assert document["summary"]["slo_attainment"] == 0.5
    assert document["summary"]["replica_minutes"] == pytest.approx(summary.replica_minutes)
    text = (out / SUMMARY_TEXT_NAME).read_text()
    assert "SLO attainment  50.0%" in text
    assert "11.0 replica-minutes" in text


def test_panel_shows_every_quantity_of_the_issue() -> None:
    """The live view shows offered load, waiting, running, KV usage, TPOT p90, desired and ready replicas."""
    lines = render_panel(RUN[1], metric="vllm_requests_inflight", target=24, max_replicas=8, peak_rps=20)
    panel = "\n".join(lines)
    for text in (
        "offered   10.0 req/s",
        "waiting       40",
        "running     3",
        "KV  25.0%",
        "TPOT p90   2.1ms",
    ):
        assert text in panel
    assert "desired   3  ready   2  loading   1" in panel
    assert "██░·····" in panel  # 2 serving, 1 loading, 5 absent of max 8


def test_live_view_redraws_on_a_terminal_and_prints_lines_elsewhere() -> None:
    """On a terminal the panel is redrawn in place (cursor up + clear per line); in a pipe every n-th tick
    is one plain line without escape codes."""
    terminal = io.StringIO()
    view = LiveView(terminal, metric="m", target=1, max_replicas=4, peak_rps=10, interactive=True)
    view.update(RUN[0])
    view.update(RUN[1])
    assert terminal.getvalue().count("\x1b[1A\x1b[2K") == 5

    pipe = io.StringIO()
    view = LiveView(pipe, metric="m", target=1, max_replicas=4, peak_rps=10, interactive=False, every=2)
    for s in RUN:
        view.update(s)
    lines = pipe.getvalue().splitlines()
    assert lines == [render_line(RUN[0]), render_line(RUN[2]), render_line(RUN[4])]
    assert "\x1b" not in pipe.getvalue()
    assert "metric=-" in render_line(RUN[2])


def gap(t: float, replicas: int) -> Tick:
    """A tick with no Ready replica: nothing reports a queue, a KV cache or a latency."""
    return Tick(
        t=t, stage="spike", offered_rps=10.0, sent_rps=9.5, completed_rps=0.0, waiting=None, running=None,
        kv_usage=None, tpot_p90=None, ttft_p90=None, metric=None, desired=replicas, ready=0, replicas=replicas,
    )  # fmt: skip


GAP_RUN = [tick(0, 2, waiting=5), gap(60, 2), gap(120, 3), tick(180, 3, waiting=9), tick(240, 3)]


def test_gaps_stay_gaps_in_csv_plot_and_summary(tmp_path: Path) -> None:
    """Unknown values are empty CSV cells, breaks (NaN) in the plotted lines, and neither zeros in the summary
    nor hidden: the seconds without a Ready replica are reported."""
    summary = write_report(tmp_path, GAP_RUN, [])
    rows = (tmp_path / CSV_NAME).read_text().splitlines()
    header = rows[0].split(",")
    for row in rows[2:4]:
        cells = dict(zip(header, row.split(","), strict=True))
        assert [cells[k] for k in ("waiting", "running", "kv_usage", "tpot_p90", "metric")] == [""] * 5
    assert read_csv(tmp_path / CSV_NAME) == GAP_RUN
    drawn = figure(GAP_RUN, title="t")
    lines = {
        str(line.get_label()): [float(v) for v in np.asarray(line.get_ydata(), dtype=float)]
        for axis in drawn.axes
        for line in axis.get_lines()
    }
    plt.close(drawn)
    for label in ("waiting", "running", "KV cache usage"):
        values = lines[label]
        assert [math.isnan(v) for v in values] == [False, True, True, False, False], label
    assert lines["waiting"][0] == 5 and lines["KV cache usage"][3] == 0.25
    assert summary.peak_queue == 9
    assert summary.no_ready_seconds == 120
    assert "120 s without a ready replica" in summary.text()


def test_summary_of_a_run_that_never_had_a_ready_replica() -> None:
    """With no known queue length at all, the peak queue is unknown, not 0."""
    summary = summarize([gap(0, 1), gap(60, 1)], [])
    assert summary.peak_queue is None
    assert "peak queue      n/a" in summary.text()


def test_views_show_a_gap_as_a_dash() -> None:
    """The live panel and line print `-` for unknown waiting, running and KV usage, never 0."""
    line = render_line(gap(60, 2))
    assert "waiting=- running=- kv=-" in line
    panel = "\n".join(render_panel(gap(60, 2), metric="m", target=1, max_replicas=4, peak_rps=10))
    assert "waiting        -   running     -   KV      -" in panel
