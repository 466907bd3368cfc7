"""The backtest's replica from a profile file (`lab.backtest.inputs.profile_calibration`), checked
against what real vLLM 0.26.0 did under open arrivals (recorded files, no engine started here)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from lab.backtest.calibration import CalibrationError
from lab.backtest.inputs.profile_calibration import from_profile
from lab.profile.schema import load

ROOT = Path(__file__).resolve().parents[4]
KV = ROOT / "examples" / "kv-s0-profile.json"
LONG = ROOT / "examples" / "long-2048-profile.json"
#: the open-loop steps recorded beside the 2,048-token profile (bench/sweep_steps.py, the same engine)
LONG_SWEEP = (
    ROOT / "runs" / "2026-11-26-real-vllm-0.26.0-h200" / "gpu-bound-8b" / "long-2048" / "sweep-a.jsonl"
)


def test_a_profile_without_open_loop_steps_is_read_from_its_closed_loop_levels() -> None:
    """The 2,048-token profile's budget ran out before its rate steps; its levels measured the server."""
    profile = load(LONG)
    assert not [s for s in profile.steps if s.kind == "rate"]
    cal = from_profile(profile, "long")
    model = cal.model
    assert cal.capacity.value == pytest.approx(profile.saturated_rate)
    # the most running in any level, queued ones too (28.8 at 32 clients), not the unqueued 15.6
    assert model.slots == pytest.approx(max(s.running for s in profile.steps))
    # A request's time at each level without a queue (the client's mean latency), within 10 %: the
    # model's line is pinned to the saturated point (28.8 running at 1.86 req/s: 15.5 s, preemptions
    # in), where the levels' own line reaches 14.5 s, so it sits 5-7 % above them.
    for level in (s for s in profile.steps if s.concurrency - s.running < 0.5):
        assert model.duration(level.running) == pytest.approx(level.e2e_seconds["mean"], rel=0.1)
    assert "closed-loop levels" in cal.methods["shape"]


def test_closed_loop_ttft_is_lockstep_and_the_model_follows_open_arrivals() -> None:
    """Closed-loop clients of one length send their prompts together: at 16 clients the profile read a
    TTFT p50 of 275 ms, where 1.6 req/s of open arrivals at 20 running read 46 ms. The model's TTFT at
    that batch must be near the open-loop step's (a line through the levels gave 370 ms)."""
    cal = from_profile(load(LONG), "long")
    step = json.loads(LONG_SWEEP.read_text(encoding="utf-8").splitlines()[0])
    assert step["rate"] == 1.6 and step["slo_ttft_ok"]
    predicted = cal.model.ttft(step["running_mean"])
    assert 0.5 * step["client_ttft_p50"] <= predicted <= 1.5 * step["client_ttft_p50"]
    sixteen = next(s for s in load(LONG).steps if s.clients == 16)
    assert sixteen.ttft_seconds["p50"] > 4 * predicted


def test_a_profile_with_open_loop_steps_draws_ttft_from_them_alone() -> None:
    """The KV-bound profile's open-loop steps without a queue: the line holds each within 20 %; its
    closed-loop levels of 4 and 8 clients read over twice the line (lockstep), so they stay out."""
    profile = load(KV)
    cal = from_profile(profile, "kv")
    assert "open-loop steps" in cal.methods["ttft_base"]
    open_steps = [
        s for s in profile.steps if s.kind == "rate" and s.queue_stable and s.concurrency - s.running < 0.5
    ]
    assert len(open_steps) >= 3
    for s in open_steps:
        assert cal.model.ttft(s.running) == pytest.approx(s.ttft_seconds["p50"], rel=0.2)
    for clients in (4, 8):
        level = next(s for s in profile.steps if s.clients == clients)
        assert level.ttft_seconds["p50"] > 2 * cal.model.ttft(level.running)


def test_a_profile_with_neither_open_steps_nor_unqueued_levels_says_what_it_lacks() -> None:
    profile = load(LONG)
    queued = replace(profile, steps=tuple(s for s in profile.steps if s.concurrency - s.running >= 0.5))
    with pytest.raises(CalibrationError, match="no closed-loop level without a queue"):
        from_profile(queued, "q.json")
    unsaturated = replace(profile, saturated_rate=None)
    with pytest.raises(CalibrationError, match="throughput with a standing queue"):
        from_profile(unsaturated, "u.json")
