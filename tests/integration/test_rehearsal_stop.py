"""A rehearsal stopped mid-run (Ctrl-C, or SIGTERM from a supervisor) ends every engine it started and
writes the record of what it played.

The rehearsal runs a long trace on emulator processes; once a scale-up has started a second engine
(its log appears) the rehearsal is signalled, and after it exits (status 130) no process of its
engines is left: not the first replica serving, not the second one loading. Its record says it was
stopped, by which signal and when, and accounts for every request sent: completed, failed, or in
flight at the stop. A stop while the first replica is still loading writes a record too: no load,
the engine's start.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.integration import rehearsals
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

# Enough load at once for a scale-up; long enough that the run is still going when signalled.
TRACE = [(600.0, 8.0)]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stopped_rehearsal_leaves_no_engine_running(tmp_path: Path, sig: signal.Signals) -> None:
    name = rehearsals.marker()
    trace = rehearsals.write_trace(tmp_path / "trace.csv", TRACE)
    out = tmp_path / "out"
    process = rehearsals.start(rehearsals.rehearse_command(out, trace, name, "--max-replicas", "3"))
    try:
        wait_for(lambda: len(list((out / "engines").glob("*.log"))) >= 2, timeout=90)
        assert len(rehearsals.processes_with(name)) >= 2  # the rehearsal and its engines
        process.send_signal(sig)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, output[-3000:]
    assert "every engine it started has ended" in output
    # The engines' groups got SIGTERM, then SIGKILL after the grace: gone by the time it exited.
    deadline = time.monotonic() + 5
    while rehearsals.processes_with(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not rehearsals.processes_with(name)
    assert_stopped_record(out, sig, output)


def assert_stopped_record(out: Path, sig: signal.Signals, output: str) -> None:
    """The record is written and says the truth: stopped by `sig` mid-load, every request counted."""
    record = json.loads((out / "rehearsal.json").read_text(encoding="utf-8"))
    stopped, summary = record["stopped"], record["summary"]
    assert stopped["by"] == sig.name and stopped["load_began"], stopped
    # Signalled after a scale-up began: some load was played, and the last tick is the stop's.
    ticks = (out / "demo.csv").read_text(encoding="utf-8").splitlines()[1:]
    last = float(ticks[-1].split(",")[0])
    assert 0 < stopped["at"] <= last < stopped["at"] + 30, (stopped, last)
    # No request unaccounted for: each one sent completed, failed, or was in flight at the stop.
    sent = len((out / "sent.csv").read_text(encoding="utf-8").splitlines()) - 1
    assert sent == stopped["sent"] > 0
    assert sent == summary["completed"] + summary["failed"] + stopped["in_flight"], stopped
    assert summary["requests"] == summary["completed"] + summary["failed"]
    # 8 req/s against a replica serving ~3.3: requests were in flight when the signal came.
    assert stopped["in_flight"] > 0 and summary["completed"] > 0, stopped
    # No prediction for a stopped run (docs/rehearsal.md); both engines' starts are recorded.
    assert record["prediction"] is None and record["band"] is None
    assert [c["name"] for c in record["cold_starts"]][:2] == ["r1", "r2"]
    assert all(c["stopped"] is not None for c in record["cold_starts"])
    text = (out / "rehearsal.txt").read_text(encoding="utf-8")
    assert f"STOPPED         {stopped['at']:.0f} s into the load by {sig.name}" in text
    assert text.splitlines()[0] in output  # the report is printed too


def test_a_rehearsal_stopped_while_its_first_engine_loads_records_that(tmp_path: Path) -> None:
    name = rehearsals.marker()
    trace = rehearsals.write_trace(tmp_path / "trace.csv", TRACE)
    out = tmp_path / "out"
    process = rehearsals.start(rehearsals.rehearse_command(out, trace, name))
    try:
        # r1's log: its process is loading (a 20 s emulated load delay, 2 s of wall time).
        wait_for(lambda: any((out / "engines").glob("r1-*.log")), timeout=60)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, output[-3000:]
    wait_for(lambda: not rehearsals.processes_with(name), timeout=5, what="every engine gone")
    record = json.loads((out / "rehearsal.json").read_text(encoding="utf-8"))
    stopped = record["stopped"]
    assert stopped["by"] == "SIGTERM" and not stopped["load_began"], stopped
    assert stopped["sent"] == stopped["in_flight"] == record["summary"]["requests"] == 0
    [first] = record["cold_starts"]
    assert first["name"] == "r1" and first["healthy"] is None and first["stopped"] is not None
    assert "STOPPED         before the load began by SIGTERM" in (out / "rehearsal.txt").read_text()


def test_an_engine_that_will_not_start_ends_the_run_with_its_record(tmp_path: Path) -> None:
    name = rehearsals.marker()
    trace = rehearsals.write_trace(tmp_path / "trace.csv", TRACE)
    out = tmp_path / "out"
    command = rehearsals.rehearse_command(out, trace, name)
    at = command.index("--engine") + 1
    command[at] += " --no-such-flag"  # the emulator's parser refuses it: the first replica never starts
    process = rehearsals.start(command)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 1, output[-3000:]
    assert "--no-such-flag" in output  # the engine's own words, from its log
    assert not rehearsals.processes_with(name)
    stopped = json.loads((out / "rehearsal.json").read_text(encoding="utf-8"))["stopped"]
    assert stopped["by"] == "engine failure" and "--no-such-flag" in stopped["reason"]
    assert not stopped["load_began"] and stopped["sent"] == 0
    assert "STOPPED         before the load began by engine failure" in (out / "rehearsal.txt").read_text()
