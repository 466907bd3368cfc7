"""`vllm-autoscale demo --profile smoke` as a real process: the whole loop scales up and back down.

Emulated replicas, the adapter on the scrape source, the load generator and the HPA model all run
for real in the child process; this test reads only what the demo leaves behind (CSV, PNG, summary).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.demo.loadgen import SCENARIOS
from lab.demo.report import CSV_NAME, PNG_NAME, SUMMARY_NAME, SUMMARY_TEXT_NAME, read_csv
from tests.integration.conftest import run_smoke_demo

pytestmark = pytest.mark.integration


def test_smoke_profile_scales_up_under_the_spike_and_down_after(smoke_demo: tuple[Path, str]) -> None:
    """Under the spike the HPA model adds replicas that become Ready after their cold start; after the
    spike, once the scale-down window has passed, it removes them again. The PNG, the CSV and the summary
    are written to --out."""
    out, stdout = smoke_demo

    ticks = read_csv(out / CSV_NAME)
    profile = SCENARIOS["smoke"]
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
    assert "SLO attainment" in stdout


def test_the_same_seed_gives_the_same_run_and_another_seed_another(
    smoke_demo: tuple[Path, str], tmp_path: Path
) -> None:
    """On virtual time (`lab.virtual_time`) a run depends on its seed only, not on the machine's load:
    the second run's CSV and summary are the first's, byte for byte. A different seed plays different
    traffic, so the equality is not the report of something that ignores its input."""
    first, _ = smoke_demo
    again, other = tmp_path / "again", tmp_path / "other"
    run_smoke_demo(again)
    run_smoke_demo(other, "--seed", "1")
    for name in (CSV_NAME, SUMMARY_NAME, SUMMARY_TEXT_NAME):
        assert (again / name).read_bytes() == (first / name).read_bytes(), name
    assert (other / CSV_NAME).read_bytes() != (first / CSV_NAME).read_bytes()
