"""The knee: the highest held rate below every failure, never guessed; curves read off the steps."""

from __future__ import annotations

import pytest

from lab.profile.knee import bracket, find_knee, interpolate, knee_step, rate_verdicts, tpot_vs_batch
from lab.stats import linear_fit
from tests.lab.profile.builders import step


def test_the_knee_is_the_highest_rate_that_held_below_the_first_failure() -> None:
    steps = [step(2.0), step(4.0, running=4, kv=0.3, ttft=0.2, tpot=0.03), step(5.0, held=False), step(3.0)]
    knee = find_knee(steps, 0.9)
    assert knee is not None
    assert (knee.rate, knee.concurrency, knee.kv_usage, knee.ttft_seconds, knee.tpot_seconds) == (
        4.0,
        4.0,
        0.3,
        0.2,
        0.03,
    )


def test_a_pass_above_a_failure_is_noise() -> None:
    """A rate that held above one that failed does not raise the knee."""
    assert knee_step([step(2.0), step(3.0, stable=False), step(4.0)]) == step(2.0)


def test_the_bracket_reads_a_band_with_or_without_a_failure() -> None:
    """What a sweep of fixed steps reads (`fidelity`): the highest held rate below the lowest failed,
    and that failed rate; without a failure the highest held rate, and no upper end."""
    steps = [step(30.0), step(35.0, held=False), step(40.0)]
    assert bracket(steps) == (step(30.0), 35.0)
    assert bracket([step(30.0)]) == (step(30.0), None)
    assert bracket([step(30.0, held=False)]) == (None, 30.0)


def test_no_failure_means_no_knee() -> None:
    """While every rate held, the knee lies higher than the profile went: none is reported."""
    assert find_knee([step(1.0), step(2.0)], 0.9) is None


def test_a_failure_at_the_lowest_rate_means_no_knee() -> None:
    assert find_knee([step(1.0, held=False), step(2.0, held=False)], 0.9) is None


def test_concurrency_steps_never_make_the_knee() -> None:
    assert find_knee([step(5.0, kind="concurrency"), step(6.0, held=False)], 0.9) is None


def test_a_repeated_rate_reads_the_later_step() -> None:
    """The knee's confirmation (the same rate again) supplies the knee's figures."""
    confirmed = step(4.0, ttft=0.25)
    assert knee_step([step(4.0, ttft=0.2), step(5.0, held=False), confirmed]) is confirmed


def test_tpot_against_batch_reads_the_closed_loop_steps() -> None:
    """Concurrency steps only, by batch size, with the server's TPOT where it has one."""
    steps = [
        step(1.0, kind="concurrency", running=4, tpot=0.05, server_tpot=0.04),
        step(1.0, kind="concurrency", running=1, tpot=0.02),
        step(3.0, running=2, tpot=0.09),
    ]
    assert tpot_vs_batch(steps) == ((1, 0.02), (4, 0.04))


def test_tpot_against_batch_falls_back_to_rate_steps() -> None:
    assert tpot_vs_batch([step(3.0, running=2, tpot=0.03), step(4.0, running=3, tpot=0.04)]) == (
        (2, 0.03),
        (3, 0.04),
    )


def test_linear_fit_and_interpolation() -> None:
    fit = linear_fit([(1.0, 3.0), (2.0, 5.0), (3.0, 7.0)])
    assert fit is not None and fit == pytest.approx((1.0, 2.0))
    assert linear_fit([(1.0, 3.0), (1.0, 4.0)]) is None
    points = [(0.0, 0.0), (2.0, 4.0), (4.0, 6.0)]
    assert [interpolate(points, x) for x in (-1.0, 1.0, 3.0, 9.0)] == [0.0, 2.0, 5.0, 6.0]


def test_of_two_steps_of_equal_length_the_decided_one_decides_the_rate() -> None:
    """A repeat that ended marginal (undecided at its longest) does not overturn a decided step of
    the same length, in either order; of two decided ones the latest decides."""
    from dataclasses import replace

    decided = replace(step(2.3), window_seconds=170.0)
    flipped = replace(step(2.3, held=False), window_seconds=170.0, marginal=True)
    assert rate_verdicts([decided, flipped]) == [decided]
    assert rate_verdicts([flipped, decided]) == [decided]
    later = replace(step(2.3, held=False), window_seconds=170.0)
    assert rate_verdicts([decided, later]) == [later]


def test_lengths_that_differ_by_the_clocks_arithmetic_are_equal() -> None:
    """The two windows of an emulator profile's 6.24 req/s (its deciding step held, its repeat
    ended marginal): 2e-14 s apart, one plan's length; the decided step decides, as the search
    let it. A longer step, by a measurable margin, still decides whatever its verdict."""
    from dataclasses import replace

    decided = replace(step(6.24), window_seconds=64.11169792697328)
    flipped = replace(step(6.24, held=False), window_seconds=64.1116979269733, marginal=True)
    assert rate_verdicts([decided, flipped]) == [decided]
    longer = replace(flipped, window_seconds=64.2)
    assert rate_verdicts([decided, longer]) == [longer]
