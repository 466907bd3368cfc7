"""The scrape source's smoothing (adapter/sources/smoothing.py): per key, the mean of the values of the
scrape rounds inside the window, from `Sample`s as the source computes them each round."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from adapter.sources import Gap, Sample
from adapter.sources.smoothing import Smoother

KEY = ("vllm_requests_inflight", "prod", "model_name=llama")
T0 = 1_700_000_000.0


def _feed(
    smoother: Smoother, rounds: Sequence[tuple[float, float | None]], window: float = 10.0
) -> list[Sample]:
    """Each round's sample (value at `T0 + t`, 2 targets) through the smoother, in order."""
    return [smoother.smoothed(KEY, Sample(value, T0 + t, 2), window) for t, value in rounds]


def test_a_window_not_yet_full_serves_the_mean_of_what_it_has() -> None:
    served = _feed(Smoother(), [(0, 10.0), (1, 20.0), (2, 60.0)])
    assert [s.value for s in served] == [10.0, 15.0, 30.0]


def test_rounds_older_than_the_window_leave_it() -> None:
    """(now - window, now], as Prometheus 3 reads a range: the round exactly a window old is out, so
    a full window of rounds on the ticks holds window / interval of them."""
    served = _feed(Smoother(), [(0, 100.0), (5, 0.0), (9, 0.0), (10, 0.0), (14.5, 0.0), (15, 6.0)])
    assert [s.value for s in served] == [100.0, 50.0, pytest.approx(100 / 3), 0.0, 0.0, 1.5]


def test_the_sample_time_targets_and_gaps_are_the_latest_rounds() -> None:
    """The age is that of the newest raw samples, so max_age judges the latest round."""
    smoother = Smoother()
    smoother.smoothed(KEY, Sample(4.0, T0, 3), 30.0)
    latest = smoother.smoothed(KEY, Sample(8.0, T0 + 1, 2), 30.0)
    assert latest == Sample(6.0, T0 + 1, 2, ())


def test_a_failed_round_is_never_averaged_in_as_a_zero() -> None:
    """A round whose fetch raised never reaches the smoother: the mean is of the rounds that had values."""
    smoother = Smoother()
    _feed(smoother, [(0, 12.0), (1, 12.0)])
    # rounds 2 and 3 failed (the source raised: PartialFailure, SourceUnavailable)
    (after,) = _feed(smoother, [(4, 12.0)])
    assert after.value == 12.0


def test_a_gap_or_no_value_is_served_as_it_is_and_not_recorded() -> None:
    smoother = Smoother()
    _feed(smoother, [(0, 10.0)])
    gap = Sample(3.0, T0 + 1, 2, (Gap("vllm:num_requests_waiting", "prod/a", "absent"),))
    assert smoother.smoothed(KEY, gap, 10.0) is gap
    empty = Sample(None, T0 + 2, 2)
    assert smoother.smoothed(KEY, empty, 10.0) is empty
    (after,) = _feed(smoother, [(3, 20.0)])
    assert after.value == 15.0, "neither the gap's partial sum nor the empty round counted"


def test_a_non_finite_value_makes_the_mean_non_finite_while_it_is_in_the_window() -> None:
    """As avg_over_time over a NaN sample: a broken round is not dropped to make a number."""
    served = _feed(Smoother(), [(0, 1.0), (1, math.nan), (2, 1.0), (11.5, 1.0)])
    assert served[0].value == 1.0
    assert all(math.isnan(s.value or 0.0) for s in served[1:3])
    assert served[3].value == 1.0
    (inf,) = _feed(Smoother(), [(0, math.inf)])
    assert inf.value == math.inf


def test_one_round_fetched_twice_counts_once() -> None:
    """The cache may refresh a key twice within one round: the same sample time is one round."""
    served = _feed(Smoother(), [(0, 10.0), (1, 20.0), (1, 20.0), (1, 20.0)])
    assert served[-1].value == 15.0


def test_a_pod_that_vanishes_fades_out_over_one_window() -> None:
    """Two pods of 10 in flight; one vanishes after round 2. Its rounds stay in the mean until they
    leave the window: the mean steps down a round at a time, never below the live pod's 10."""
    rounds = [(float(t), 20.0 if t < 3 else 10.0) for t in range(8)]
    served = _feed(Smoother(), rounds, window=4.0)
    assert [s.value for s in served] == [20.0, 20.0, 20.0, 17.5, 15.0, 12.5, 10.0, 10.0]


def test_keys_are_apart_and_windows_their_own() -> None:
    smoother = Smoother()
    other = ("vllm_requests_inflight", "staging", "model_name=llama")
    smoother.smoothed(KEY, Sample(10.0, T0, 1), 5.0)
    smoother.smoothed(other, Sample(100.0, T0, 1), 60.0)
    assert smoother.smoothed(KEY, Sample(20.0, T0 + 6, 1), 5.0).value == 20.0
    assert smoother.smoothed(other, Sample(200.0, T0 + 6, 1), 60.0).value == 150.0


def test_a_key_nobody_asks_for_is_dropped_once_a_window_old() -> None:
    smoother = Smoother()
    idle = ("vllm_requests_running", "prod", "")
    smoother.smoothed(idle, Sample(1.0, T0, 1), 5.0)
    _feed(smoother, [(float(t), 1.0) for t in range(12)], window=5.0)
    assert len(smoother) == 1, "the idle key's history is gone, the live key's kept"
    # asked for again, it starts a fresh window: the old value does not come back
    assert smoother.smoothed(idle, Sample(3.0, T0 + 12, 1), 5.0).value == 3.0


def test_the_clock_stepping_back_restarts_the_window() -> None:
    served = _feed(Smoother(), [(10, 50.0), (11, 50.0), (5, 2.0)])
    assert served[-1].value == 2.0


def test_an_undatable_round_is_served_as_it_is() -> None:
    smoother = Smoother()
    nan_time = Sample(5.0, math.nan, 1)
    assert smoother.smoothed(KEY, nan_time, 10.0) is nan_time
    assert len(smoother) == 0
