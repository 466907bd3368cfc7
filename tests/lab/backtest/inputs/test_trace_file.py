"""Trace files: the three formats read onto a grid, gaps kept, and every malformed file a one-line error."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lab.backtest.history import HistoryError
from lab.backtest.inputs.trace_file import TraceError, read_trace
from lab.demo.report import write_csv
from lab.records import Tick
from tests.lab.backtest.tsdb import REAL


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_regular_trace_keeps_its_step_and_token_shapes(tmp_path: Path) -> None:
    """Token columns are totals of the row's requests: per request they are divided by arrivals."""
    history = read_trace(
        _write(
            tmp_path,
            "time,arrivals,prompt_tokens,output_tokens\n0,10,10000,2000\n5,20,40000,6000\n10,0,0,0\n",
        )
    )
    assert history.step == 5
    assert history.arrivals == (10, 20, 0)
    assert history.prompt_tokens is not None and history.prompt_tokens[:2] == (1000, 2000)
    assert history.output_tokens is not None and history.output_tokens[1] == 300
    assert math.isnan(history.output_tokens[2])  # no request: no shape, not zero
    assert history.gaps() == []


def test_a_missing_row_of_a_regular_trace_is_a_gap(tmp_path: Path) -> None:
    rows = "".join(f"{t},3\n" for t in (0, 1, 2, 3, 7, 8, 9))
    history = read_trace(_write(tmp_path, "time,arrivals\n" + rows))
    assert [(g.start, g.end) for g in history.gaps()] == [(4.0, 7.0)]
    assert history.requests == 21


def test_an_empty_arrivals_cell_is_a_gap_until_the_next_row(tmp_path: Path) -> None:
    history = read_trace(_write(tmp_path, "time,arrivals\n0,1\n1,\n2,\n3,1\n"))
    assert [(g.start, g.end) for g in history.gaps()] == [(1.0, 3.0)]


def test_a_per_request_trace_with_iso_times_is_binned_by_second(tmp_path: Path) -> None:
    """Irregular rows (one per request): time without rows is time without requests."""
    text = (
        "time,arrivals\n"
        "2026-11-26T10:00:00Z,1\n"
        "2026-11-26T10:00:00.4Z,1\n"
        "2026-11-26T10:00:03.2Z,1\n"
        "2026-11-26T10:00:03.9Z,1\n"
    )
    history = read_trace(_write(tmp_path, text))
    assert history.step == 1
    assert history.arrivals == (2, 0, 0, 2)
    assert history.gaps() == []


def test_a_demo_csv_is_a_trace_with_the_fleets_recording(tmp_path: Path) -> None:
    """Arrivals are sent_rps over each tick; completions, queue and Ready replicas come along."""
    ticks = [
        Tick(
            t=t,
            stage="ramp",
            offered_rps=2.0,
            sent_rps=2.0 + t / 10,
            completed_rps=1.5,
            waiting=3,
            running=10,
            kv_usage=0.5,
            tpot_p90=0.04,
            ttft_p90=0.3,
            metric=12.0,
            desired=2,
            ready=2,
            replicas=2,
        )
        for t in (0.0, 5.0, 10.0, 15.0)
    ]
    path = tmp_path / "demo.csv"
    write_csv(path, ticks)
    history = read_trace(path)
    assert history.step == 5
    assert history.arrivals == pytest.approx((12.5, 15.0, 17.5))
    assert history.completions == pytest.approx((7.5, 7.5, 7.5))
    assert history.waiting == (3, 3, 3) and history.replicas == (2, 2, 2)


def test_the_real_stage_table_is_a_trace() -> None:
    """load-stages.csv: the offered load per stage, one server, the queue the rates imply."""
    history = read_trace(REAL / "load-stages.csv")
    assert history.step == 1 and len(history.arrivals) == 257
    assert history.arrivals[180] == 46.1  # r1.60C: client_sent_rps
    assert history.waiting is not None and 560 < max(history.waiting) < 600  # waiting_max was 575
    assert history.replicas is not None and set(history.replicas) == {1.0}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "is empty", id="empty file"),
        pytest.param("time,arrivals\n", "has a header but no rows", id="header only"),
        pytest.param("when,count\n0,1\n", "has no 'time' column (columns: when, count)", id="missing column"),
        pytest.param(
            "time,arrivals\n0,1\n1,many\n", "line 3: arrivals 'many' must be a number", id="bad number"
        ),
        pytest.param(
            "time,arrivals\n0,-1\n", "line 2: arrivals '-1' must be a finite number >= 0", id="negative"
        ),
        pytest.param(
            "time,arrivals\n5,1\n1,1\n", "line 3: time '1' is before the previous row's", id="time goes back"
        ),
        pytest.param(
            "time,arrivals\nyesterday,1\n",
            "line 2: time 'yesterday' must be seconds or an ISO 8601 time",
            id="bad time",
        ),
        pytest.param("time,arrivals\n0,1,2\n", "line 2: 3 cells, the header has 2", id="ragged row"),
        pytest.param("time,arrivals\n0,\n1,\n", "has no arrivals in any step", id="no data at all"),
    ],
)
def test_a_malformed_trace_is_a_one_line_error_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(HistoryError) as raised:
        read_trace(path)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    if isinstance(raised.value, TraceError):
        assert str(path) in str(raised.value)
