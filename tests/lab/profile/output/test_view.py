"""The live progress: a line per phase and per step in a pipe, a panel redrawn in place on a terminal."""

from __future__ import annotations

import io

from lab.load.metrics_reader import Snapshot
from lab.profile.output.view import ProgressView, step_line
from tests.lab.profile.builders import step


def test_a_pipe_gets_one_line_per_phase_and_per_step() -> None:
    out = io.StringIO()
    view = ProgressView(out, title="t", budget=60, percentile=0.9, interactive=False)
    view.phase("4 clients (closed loop)", 0.0, 12.0)
    view.tick(3.0, Snapshot(3.0, 4, 1, 0.25, 0), inflight=5, done=17)
    view.step(step(3.5, kind="concurrency", clients=4, ttft=0.25, tpot=0.031))
    view.step(step(5.0, held=False, stable=False))
    lines = out.getvalue().splitlines()
    assert lines[0] == "4 clients (closed loop): 12s"
    assert lines[1].split() == ["4", "clients", "3.5", "3.5", "1.0", "10%", "250ms", "31ms", "yes", "stable"]
    assert lines[2].split()[-2:] == ["NO", "GROWS"]
    assert "\x1b" not in out.getvalue()


def test_a_terminal_gets_the_panel_redrawn() -> None:
    """Each update clears the lines drawn before and draws the header, the live numbers and the table."""
    out = io.StringIO()
    view = ProgressView(out, title="profile of m", budget=60, percentile=0.9, interactive=True)
    view.phase("2.5 req/s (open loop)", 0.0, 10.0)
    view.tick(5.0, Snapshot(5.0, 6, 2, 0.5, 1), inflight=9, done=40)
    view.step(step(2.5))
    text = out.getvalue()
    last = text.split("\x1b[2K")[-1]
    assert "profile of m" in last and "running 6  waiting 2  KV 50%  preemptions 1" in last
    assert "in flight 9" in last and step_line(step(2.5), 0.9) in last
    assert text.count("\x1b[1A\x1b[2K") >= 4
