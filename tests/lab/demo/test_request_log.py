"""The demo's request log (`lab.demo.request_log`): per-tick counts and the live latency window."""

from __future__ import annotations

import pytest

from lab.demo.request_log import RequestLog
from lab.records import RequestRecord


def test_counts_are_since_the_previous_take_and_only_ok_requests_complete() -> None:
    """`take_counts` returns what was sent and completed since its last call; failed requests are sent but
    never completed, and every outcome stays in `records` for the report."""
    log = RequestLog()
    for record in (
        RequestRecord(0, "ok", 0.1, 0.01),
        RequestRecord(0, "rejected"),
        RequestRecord(0, "aborted"),
    ):
        log.sent()
        log.record(record, at=1.0)
    assert log.take_counts() == (3, 1)
    assert log.take_counts() == (0, 0)
    assert [r.outcome for r in log.records] == ["ok", "rejected", "aborted"]


def test_recent_p90_covers_only_the_window_and_skips_unknown_latencies() -> None:
    """The live p90s cover requests that finished within the window before now; a latency nobody measured
    is left out rather than counted as zero; with none left the p90 is unknown."""
    log = RequestLog(window=30.0)
    log.record(RequestRecord(0, "ok", 9.0, 0.9), at=0.0)
    log.record(RequestRecord(0, "ok", None, 0.02), at=40.0)
    log.record(RequestRecord(0, "ok", 0.2, 0.04), at=50.0)
    ttft, tpot = log.recent_p90(60.0)
    assert ttft == pytest.approx(0.2)
    assert tpot == pytest.approx(0.038)
    assert log.recent_p90(100.0) == (None, None)


def test_recent_tpot_mean_is_the_mean_over_the_window() -> None:
    """TPOT's mean (what the adapter serves) covers the
    same window as the p90s and skips one-token requests."""
    log = RequestLog(window=30.0)
    log.record(RequestRecord(0, "ok", 0.1, 0.9), at=0.0)
    log.record(RequestRecord(0, "ok", 0.1, 0.02), at=40.0)
    log.record(RequestRecord(0, "ok", 0.1, None), at=45.0)
    log.record(RequestRecord(0, "ok", 0.2, 0.04), at=50.0)
    assert log.recent_tpot_mean(60.0) == pytest.approx(0.03)
    assert log.recent_tpot_mean(100.0) is None
