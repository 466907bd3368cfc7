"""The rehearsal's own files: each replica's measured cold start, and what was sent as a backtest trace."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from lab.backtest.inputs.trace_file import read_trace
from lab.rehearsal.clients import Sent
from lab.rehearsal.replicas import ColdStart
from lab.rehearsal.report import cold_start_lines, write_cold_starts, write_sent

FIRST = ColdStart(
    "r1", -50.0, initial=True, port=9001, spawned=-50.0, healthy=-2.0, first_token=1.0, stopped=400.0
)
SECOND = ColdStart(
    "r2",
    100.0,
    port=9002,
    gpu="1",
    spawned=110.0,
    healthy=150.0,
    first_token=151.5,
    retired=300.0,
    stopped=310.0,
)
RECORDS = [FIRST, SECOND]


def test_each_replicas_cold_start_and_gpu_time_is_one_row(tmp_path: Path) -> None:
    write_cold_starts(tmp_path / "c.csv", RECORDS, end=420.0)
    with (tmp_path / "c.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["replica"] for r in rows] == ["r1", "r2"]
    second = rows[1]
    assert float(second["process_to_healthy_seconds"]) == 40.0
    assert float(second["request_to_ready_seconds"]) == 50.0
    assert float(second["process_to_first_token_seconds"]) == 41.5
    assert float(second["gpu_seconds_held"]) == 200.0
    assert second["gpu"] == "1" and rows[0]["retired_seconds"] == ""


def test_the_lines_say_when_a_replica_waited_for_a_gpu() -> None:
    first, second = cold_start_lines(RECORDS)
    assert "first replica" in first and "waited" not in first
    assert "waited 10.0 s for a GPU" in second and "healthy 40.0 s" in second


def test_what_was_sent_is_a_trace_the_backtest_reads(tmp_path: Path) -> None:
    sent = [Sent(0.25, 100, 10), Sent(0.75, 300, 30), Sent(2.5, 200, 20)]
    write_sent(tmp_path / "sent.csv", sent)
    history = read_trace(tmp_path / "sent.csv")
    assert history.requests == pytest.approx(3)
    assert history.output_tokens is not None and history.output_tokens[0] == pytest.approx(20.0)
