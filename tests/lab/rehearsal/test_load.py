"""The load: recorded traffic compressed in time, played as seeded Poisson arrivals with sizes."""

from __future__ import annotations

import math

import pytest

from lab.backtest.history import History
from lab.demo.loadgen import SCENARIOS
from lab.load.workload import fixed
from lab.rehearsal.load import Load, day_history

WORKLOAD = fixed(64, 8)


def history(arrivals: tuple[float, ...], step: float = 10.0, **series: tuple[float, ...]) -> History:
    return History(step=step, arrivals=arrivals, source="test", **series)  # type: ignore[arg-type]


def test_compression_keeps_the_rates_and_shortens_the_time() -> None:
    load = Load(history((50.0, 100.0, 0.0)), compress=5.0, rate_scale=2.0)
    assert load.duration == pytest.approx(6.0)
    assert load.step == pytest.approx(2.0)
    assert load.rate_at(1.0) == pytest.approx(10.0)  # 50 per 10 s, doubled
    assert load.rate_at(3.0) == pytest.approx(20.0)
    assert load.peak_rate == pytest.approx(20.0)


def test_the_sends_follow_each_steps_rate_and_repeat_for_a_seed() -> None:
    load = Load(history((200.0, 600.0), step=100.0))
    sends = list(load.sends(WORKLOAD, seed=3))
    # Prompt ids are new on every run (no prefix-cache hits across runs); times and sizes repeat.
    again = list(load.sends(WORKLOAD, seed=3))
    assert [(s.at, s.output_tokens) for s in sends] == [(s.at, s.output_tokens) for s in again]
    first = sum(1 for s in sends if s.at < 100)
    second = len(sends) - first
    # Poisson counts of mean 200 and 600: within four standard deviations.
    assert abs(first - 200) < 4 * math.sqrt(200)
    assert abs(second - 600) < 4 * math.sqrt(600)
    assert all(len(s.prompt) == 64 and s.output_tokens == 8 for s in sends)
    assert [s.at for s in sends] == sorted(s.at for s in sends)


def test_a_gap_in_the_trace_sends_nothing() -> None:
    load = Load(history((30.0, math.nan, 30.0)))
    assert not [s for s in load.sends(WORKLOAD) if 10 <= s.at < 20]
    assert load.stage_at(15.0) == "gap"
    assert load.rate_at(15.0) == 0.0


def test_a_traces_token_columns_size_its_requests() -> None:
    load = Load(history((40.0,), prompt_tokens=(300.0,), output_tokens=(20.4,)))
    sends = list(load.sends(WORKLOAD))
    assert sends
    assert {(len(s.prompt), s.output_tokens) for s in sends} == {(300, 20)}


def test_the_demos_day_is_its_load_times_one_replicas_capacity() -> None:
    day = SCENARIOS["smoke"]
    made = day_history(day, capacity=2.0)
    assert made.duration == pytest.approx(day.duration)
    load = Load(made, compress=2.0, day=day)
    assert load.rate_at(10.0 / 2) == pytest.approx(day.at(10.5)[1] * 2.0)
    assert load.stage_at(100.0) == day.at(200.0)[0].name


def test_a_compression_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        Load(history((1.0,)), compress=0.0)
