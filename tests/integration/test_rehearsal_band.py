"""A sudden step on emulator processes, three days of it: each live outcome inside its backtest's band.

Issue 38: the HPA reads samples, so two days of the same traffic scale apart by a sync, and a step is
where that decides the SLO; the backtest predicts a band (seeded replays of the traffic the rehearsal
is asked to play, `lab.rehearsal.prediction.predict_band`), and each live day must fall inside it.
The load (requests per emulated second) holds a third of one replica's 3.3 req/s, jumps with no ramp
to 90 % of it (past the knee: one replica holds it only with a queue that comes and goes, until a
second is Ready), then to what two replicas take at 75 %, and drops back: the fleet goes 1 -> 2 or 3
and back, below its maximum of 4 (an HPA pinned at its maximum would hide the samples' effect).
Three load seeds, each a different day of Poisson arrivals, one after another (10x emulated time:
side by side, their engines starved each other of the CPU and served slower than the profile).

The band is the range of 999 seeds. Where the model is right, a live outcome falls outside the range
of n seeds with probability 2/(n+1); the test judges six outcomes (SLO attainment and
replica-minutes of three days), so it fails by chance with probability at most 6 x 2/1000 = 1.2 %.
A model error larger than the days' own spread fails it every time.

Each day is also the rehearsal's whole loop (issue 31): engine processes started when the HPA model
scales up, with cold starts of tens of emulated seconds measured from the HPA's request to Ready, every
request answered, and no engine process left behind. (The single fluid backtest's gap that issue 31
bounded at 3 points is still reported; issue 38 replaced it as the criterion: one day is one draw of
its traffic, and the band is what a prediction is.)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration import rehearsals

pytestmark = pytest.mark.integration

TRACE = [(45, 1.0), (165, 3.0), (240, 5.0), (360, 1.0)]
SEEDS = (1, 2, 3)
BAND_SEEDS = 999
_TIMEOUT = 300


def test_three_days_of_a_step_each_fall_inside_the_backtests_band(tmp_path: Path) -> None:
    name = rehearsals.marker()
    trace = rehearsals.write_trace(tmp_path / "trace.csv", [(float(u), r) for u, r in TRACE])
    runs = {}
    for seed in SEEDS:
        out = tmp_path / f"seed{seed}"
        flags = ["--downscale-stabilization", "60", "--seed", str(seed), "--band-seeds", str(BAND_SEEDS)]
        command = rehearsals.rehearse_command(out, trace, f"{name}-{seed}", *flags)
        done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT, check=False)
        assert done.returncode == 0, f"seed {seed}: {done.stdout[-4000:]}{done.stderr[-4000:]}"
        runs[seed] = out
    assert not rehearsals.processes_with(name), "an engine process outlived the rehearsal"
    for seed, out in runs.items():
        record = json.loads((out / "rehearsal.json").read_text(encoding="utf-8"))
        summary, band = record["summary"], record["band"]
        report = (out / "rehearsal.txt").read_text(encoding="utf-8")[-1500:]
        # The story: a step the fleet answers, then back down (two minutes of low load: with one, a
        # loaded machine's slower cold starts left a run at its peak). Not pinned at its maximum by
        # design: the band's median seed spends under three quarters of a fleet of 4 held for the
        # whole run. (A live day may still sit at 4 for half its ticks: on 2026-11-28 one did, 39 of
        # 74, inside its band on both counts; that is the samples' noise this test is about.)
        assert summary["peak_replicas"] >= 2, report
        scale_ups = [c for c in record["cold_starts"] if not c["initial"] and c["healthy"] is not None]
        assert scale_ups and all(c["healthy"] - c["requested"] >= 20 for c in scale_ups), report
        assert record["prediction"]["cold_start"] >= 20
        assert summary["requests"] > 500 and summary["failed"] == 0, report
        assert band["replica_minutes"]["median"] < 0.75 * 4 * TRACE[-1][0] / 60, report
        assert summary["min_replicas_after_peak"] < summary["peak_replicas"], report
        assert band["seeds"] == BAND_SEEDS
        assert band["inside"]["slo_attainment"], f"seed {seed}: {report}"
        assert band["inside"]["replica_minutes"], f"seed {seed}: {report}"
        assert (out / "band.png").stat().st_size > 0
        assert (out / "demo.png").stat().st_size > 0
