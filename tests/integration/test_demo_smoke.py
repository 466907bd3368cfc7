"""`vllm-autoscale demo --profile smoke` as a real process: the whole loop scales up and back down.

Emulated replicas, the adapter on the scrape source, the load generator and the HPA model all run
for real in the child process; this test reads only what the demo leaves behind (CSV, PNG, summary).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.demo.report import CSV_NAME, PNG_NAME, SUMMARY_NAME, SUMMARY_TEXT_NAME, read_csv
from lab.loadgen import PROFILES

pytestmark = pytest.mark.integration

# The smoke profile lasts ~23 s of wall time; start-up, drain and the plot add a few.
_TIMEOUT_SECONDS = 90


def test_smoke_profile_scales_up_under_the_spike_and_down_after(tmp_path: Path) -> None:
    """Under the spike the HPA model adds replicas that become Ready after their cold start; after the
    spike, once the scale-down window has passed, it removes them again. The PNG, the CSV and the summary
    are written to --out."""
    out = tmp_path / "out"
    command = [sys.executable, "-m", "adapter", "demo", "--profile", "smoke", "--out", str(out), "--plain"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT_SECONDS, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    ticks = read_csv(out / CSV_NAME)
    profile = PROFILES["smoke"]
    spike_start, spike_end = profile.bounds("spike")
    before = [s for s in ticks if s.t < spike_start]
    during = [s for s in ticks if spike_start <= s.t <= spike_end]
    tail = [s for s in ticks if s.t >= profile.duration - 30]
    assert before and during and tail

    start_replicas = before[0].replicas
    peak_ready = max(s.ready for s in during)
    assert peak_ready > start_replicas, "replicas did not rise under the spike"
    assert max(s.desired for s in during) >= peak_ready
    # Cold start: the scale-up is asked for before the new replicas serve.
    first_up = next(s for s in ticks if s.desired > start_replicas)
    first_ready = next(s for s in ticks if s.ready > start_replicas)
    assert first_ready.t > first_up.t
    assert all(s.ready < peak_ready for s in tail), "replicas did not fall after the spike"
    assert tail[-1].replicas < peak_ready

    png = (out / PNG_NAME).read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(png) > 20_000
    summary = json.loads((out / SUMMARY_NAME).read_text())["summary"]
    assert summary["requests"] > 100
    assert summary["peak_replicas"] == max(s.replicas for s in ticks)
    assert 0 < summary["slo_attainment"] <= 1
    assert "SLO attainment" in (out / SUMMARY_TEXT_NAME).read_text()
    assert "SLO attainment" in done.stdout
