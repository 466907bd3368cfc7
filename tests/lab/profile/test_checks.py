"""The profile's checks of itself (`lab.profile.checks`): the server's own speed over the profile."""

from __future__ import annotations

from dataclasses import replace

from lab.profile.checks import checks, completed, drift_check
from lab.profile.schema import Step
from tests.lab.profile.builders import SLO, step


def _closed(clients: int, throughput: float) -> Step:
    return replace(
        step(throughput, kind="concurrency", running=float(clients), clients=clients),
        generation_tokens_per_second=throughput * 128,
    )


def test_a_server_that_slowed_during_the_profile_is_named() -> None:
    """The batch-bound vLLM of 2026-11-26 completed 91 req/s in one run's sweep and 60 in the next:
    measured twice within a profile, such a move is a DIFFER with its size."""
    steps = [_closed(32, 77.6), _closed(64, 91.2), step(50.0), _closed(64, 60.1)]
    line = drift_check(steps, 128.0)
    assert line is not None
    assert "64 clients (closed loop) completed 91.2 req/s in the sweep and 60.1 at the end" in line
    assert "DIFFER" in line and "(-34%)" in line


def test_a_steady_server_agrees() -> None:
    line = drift_check([_closed(64, 91.2), _closed(64, 88.0)], 128.0)
    assert line is not None and line.endswith("agree (-4%)")


def test_no_repeat_says_so_and_no_sweep_says_nothing() -> None:
    assert "not measured again" in (drift_check([_closed(32, 70.0), _closed(64, 90.0)], 128.0) or "")
    assert drift_check([step(10.0)], 128.0) is None


def test_throughput_counts_tokens_when_the_server_does() -> None:
    """Completions come in lumps when requests finish together; the token counter moves every step."""
    assert completed(replace(step(10.0), generation_tokens_per_second=1280.0), 128.0) == 10.0
    assert completed(step(7.0), 128.0) == 7.0


def test_every_check_is_listed() -> None:
    lines = checks([_closed(64, 90.0), _closed(64, 89.0)], None, SLO, 90.0, 128.0)
    assert [line.split(":")[0] for line in lines] == ["open vs closed loop saturation", "server speed"]
