"""A rehearsal stopped mid-run (Ctrl-C, or SIGTERM from a supervisor) ends every engine it started.

The rehearsal runs a long trace on emulator processes; once a scale-up has started a second engine
(its log appears) the rehearsal is signalled, and after it exits no process of its engines is left:
not the first replica serving, not the second one loading.
"""

from __future__ import annotations

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
