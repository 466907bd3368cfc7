"""A rehearsal whose replica dies (SIGKILL) or hangs (SIGSTOP) after Ready, on emulator processes.

The fleet starts one replica and the load begins; ten emulated seconds in, with requests streaming from it,
the test kills or stops that replica's engine. The watch finds it gone (at once for an exit, after
`--unresponsive-after 1` s of silence for a stop): the router drops it and cuts off its requests in flight
(retried once elsewhere when no token had come, failed otherwise), the HPA model's Ready count loses it, and
the ReplicaSet starts a replacement, which takes over. The run ends as designed (status 0), no engine process
is left, the report counts the failure and its requests, and every request sent has an outcome: completed or
failed, none unaccounted for.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.integration import rehearsals
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

# Two requests a second for two emulated minutes (12 s of wall time): within one replica's capacity.
TRACE = [(120.0, 2.0)]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["dies", "hangs"])
def test_a_replica_lost_after_ready_is_replaced_and_its_requests_are_counted(
    tmp_path: Path, sig: signal.Signals
) -> None:
    name = rehearsals.marker()
    trace = rehearsals.write_trace(tmp_path / "trace.csv", TRACE)
    out = tmp_path / "out"
    command = rehearsals.rehearse_command(
        out, trace, name, "--max-replicas", "2", "--unresponsive-after", "1"
    )
    process = rehearsals.start(command)
    try:
        assert process.stdout is not None
        # Ten emulated seconds into the load (its tick line): requests in flight on r1, most streaming.
        for line in process.stdout:
            if line.startswith("t=") and float(line[2:].split("s")[0]) >= 10:
                break
        [log] = list((out / "engines").glob("r1-*.log"))
        port = log.stem.split("-")[1]
        [pid] = [
            p
            for p in rehearsals.processes_with(f"--base-port {port} ")
            if p in rehearsals.processes_with(name)
        ]
        os.kill(pid, sig)
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, output[-4000:]
    wait_for(lambda: not rehearsals.processes_with(name), timeout=10, what="every engine gone")
    record = json.loads((out / "rehearsal.json").read_text(encoding="utf-8"))
    faults, summary = record["faults"], record["summary"]
    [failed] = faults["replicas_failed"]
    assert failed["replica"] == "r1"
    expected = "exited with code -9" if sig == signal.SIGKILL else "stopped answering /health for 1s"
    assert expected in failed["reason"], output[-3000:]
    # The replacement came up and served: a second replica, Ready after the failure.
    replacement = next(c for c in record["cold_starts"] if c["name"] == "r2")
    assert replacement["healthy"] is not None and replacement["healthy"] > failed["at"]
    assert replacement["first_token"] is not None
    # Every request sent has an outcome; those cut off mid-stream are among the failed.
    sent = len((out / "sent.csv").read_text().splitlines()) - 1
    assert summary["requests"] == sent == summary["completed"] + summary["failed"]
    # Requests were streaming from r1 when it went: cut off, each one failed; a request that had no
    # token yet was re-sent once (to the replacement, or failed when none was Ready yet).
    assert 1 <= faults["cut_off"] <= summary["failed"], faults
    assert faults["cut_off"] + faults["lost_retry"] <= summary["failed"]
    assert "replicas failed after Ready" in (out / "rehearsal.txt").read_text()
