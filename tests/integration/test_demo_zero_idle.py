"""`vllm-autoscale demo --profile zero-idle` as a real process, time-scaled: the fleet scales to zero
over night, wakes for the morning burst, and returns to zero, without losing a message.

Everything runs for real in the child process: emulated replicas behind an upstream queue with a
consumer per Ready replica, the queue's exporter on HTTP, the adapter serving `queue_depth` (the docs'
PromQL on that exporter) and the vLLM metrics (scrape source), the HPA model at Kubernetes 1.37
(`minReplicas: 0`). This test reads only what the demo leaves behind (CSV and summary).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.demo.loadgen import SCENARIOS
from lab.demo.report import CSV_NAME, SUMMARY_NAME, read_csv

pytestmark = pytest.mark.integration

# 2100 emulated seconds at 60x are 35 s of wall time; start-up and the plot add a few.
_TIME_SCALE = 60
_TIMEOUT_SECONDS = 90


def test_zero_idle_scales_to_zero_wakes_for_the_burst_and_returns_to_zero_losing_nothing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    command = [
        *(sys.executable, "-m", "adapter", "demo", "--profile", "zero-idle", "--no-baseline", "--plain"),
        *("--time-scale", str(_TIME_SCALE), "--out", str(out)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT_SECONDS, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    profile = SCENARIOS["zero-idle"]
    ticks = read_csv(out / CSV_NAME)
    summary = json.loads((out / SUMMARY_NAME).read_text())["summary"]
    upstream = summary["upstream"]

    # Nothing lost, at any tick and at the end; every message is done or in the dead-letter queue.
    assert all(s.messages_lost == 0 for s in ticks)
    assert upstream["messages_lost"] == 0
    assert upstream["messages_sent"] == upstream["messages_done"] + upstream["dlq_depth"] > 500
    assert ticks[-1].dlq_depth == upstream["dlq_depth"]
    assert summary["failed"] == upstream["dlq_depth"]

    # To zero over night, after the scale-down window that follows the last of the evening's work.
    _, evening_end = profile.bounds("evening")
    morning_start, morning_end = profile.bounds("morning")
    night = [s for s in ticks if evening_end <= s.t < morning_start]
    first_zero = next(s for s in night if s.replicas == 0)
    assert first_zero.t >= evening_end + profile.downscale_stabilization - 60
    assert night[-1].replicas == 0 and night[-1].desired == 0

    # The wake-up: messages wait at zero, the HPA asks for replicas, the first serves after its cold start.
    morning = [s for s in ticks if morning_start <= s.t]
    waiting_at_zero = next(s for s in morning if (s.queue_depth or 0) > 0)
    assert waiting_at_zero.replicas == 0
    asked = next(s for s in morning if s.desired > 0)
    serving = next(s for s in morning if s.ready > 0)
    assert serving.t - asked.t >= profile.cold_start - 10
    assert serving.consumers is not None and serving.consumers >= 1
    assert upstream["wake_ups"] == 1
    assert upstream["first_wait_after_zero"] >= profile.cold_start
    assert upstream["first_done_after_zero"] > upstream["first_wait_after_zero"]
    assert max(s.queue_depth or 0 for s in morning) > 50

    # Back to zero: the backlog drained, the window passed, nothing left running or pulling.
    after = [s for s in ticks if s.t >= morning_end]
    drained = next(s for s in after if s.queue_depth == 0)
    assert ticks[-1].replicas == 0 and ticks[-1].consumers == 0 and ticks[-1].queue_depth == 0
    back_to_zero = next(s for s in after if s.replicas == 0)
    assert back_to_zero.t >= drained.t + profile.downscale_stabilization - 60
    assert upstream["seconds_at_zero"] > profile.bounds("night")[1] - profile.bounds("night")[0] - 600
