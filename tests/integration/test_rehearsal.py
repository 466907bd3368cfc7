"""The rehearsal on emulator processes agrees with its backtest (issue 31's CI criterion).

`vllm-autoscale rehearse` runs the whole loop live: each replica an emulator process started when the
HPA model scales up (a cold start of tens of emulated seconds: the emulator's load delay plus its
own start), the router in front, the adapter scraping the Ready replicas, the load from a trace file.
The trace climbs from one replica's worth to four's, holds, and falls back, so the fleet goes 1 -> 4
-> 1 (the 60 s scale-down window lets it come back within the run). The backtest of what the clients
sent, with the same policy (the profile's recommended in-flight target), on the engine's profile and
with the cold start measured, must agree within 3 points of SLO attainment and 10 % of
replica-minutes. At 10x its nine emulated minutes take 54 s of wall time, plus the first replica's
start and the report.

Seeds 0-3 of this trace (2026-11-27, a loaded 2-core machine): SLO +0.1, +1.1, +0.0, +0.3 points and
replica-minutes -0.9, -0.9, +2.0, -5.5 %. A steeper climb is where the two part: a step from one
replica's worth to four's gave the backtest 11-13 points less SLO for the same replica-minutes
(docs/rehearsal.md, "Reading the gap").
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration import rehearsals

pytestmark = pytest.mark.integration

SLO_POINTS = 3.0
REPLICA_MINUTES = 0.10
# The load in requests per (emulated) second, piece by piece: (until, rate).
# One replica's worth, a one-minute climb to two replicas' worth, then up to four's (at 2 req/s each,
# 80 % of the knee) once they are there, held, and down: a backlog forms only on the climb, and the
# plateau's in-flight total reads well above three replicas' target, so the HPA's answer there is 4
# (its maximum) whichever way a sample's noise falls.
TRACE = [(60, 1.5), (80, 2.5), (100, 4.0), (120, 5.5), (140, 7.0), (360, 8.0), (375, 4.0), (540, 1.5)]
_TIMEOUT = 240


def test_a_rehearsal_on_emulator_processes_agrees_with_its_backtest(tmp_path: Path) -> None:
    name = rehearsals.marker()
    trace = rehearsals.write_trace(tmp_path / "trace.csv", [(float(u), r) for u, r in TRACE])
    command = rehearsals.rehearse_command(tmp_path / "out", trace, name, "--downscale-stabilization", "60")
    done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert not rehearsals.processes_with(name), "an engine process outlived the rehearsal"

    record = json.loads((tmp_path / "out" / "rehearsal.json").read_text(encoding="utf-8"))
    summary, gap, predicted = record["summary"], record["gap"], record["prediction"]
    scale_ups = [c for c in record["cold_starts"] if not c["initial"] and c["healthy"] is not None]
    # The story the criterion asks for: three replicas or more, up and back down.
    assert summary["peak_replicas"] >= 3, done.stdout[-3000:]
    assert summary["min_replicas_after_peak"] < summary["peak_replicas"]
    assert record["scale_events"] >= 2
    # Cold starts of tens of emulated seconds, as measured from the HPA's request to Ready.
    assert all(c["healthy"] - c["requested"] >= 20 for c in scale_ups)
    assert predicted["cold_start"] >= 20
    assert summary["requests"] > 1000 and summary["failed"] == 0
    assert abs(gap["slo_points"]) <= SLO_POINTS, done.stdout[-2500:]
    assert abs(gap["replica_minutes_ratio"]) <= REPLICA_MINUTES, done.stdout[-2500:]
    assert (tmp_path / "out" / "demo.png").stat().st_size > 0
