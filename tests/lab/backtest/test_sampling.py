"""What the HPA reads on a seeded replay (`lab.backtest.sampling`): counts at the scrape, not means.

The bounds are statistical: every draw is seeded, so each test is one fixed outcome, and each bound is
set at least four standard deviations from the expected value computed beside it, so a correct
sampler passes with any seed and a sampler that served means (no variance) or a biased window fails.
"""

from __future__ import annotations

import math
import statistics

import pytest

from lab.backtest.sampling import Draws, Sampler


def _poisson_tail(mean: float, at_least: int) -> float:
    return 1.0 - sum(math.exp(-mean) * mean**k / math.factorial(k) for k in range(at_least))


def test_arrivals_are_whole_poisson_counts_around_the_traces_rate() -> None:
    draws = Draws(3)
    counts = draws.arrivals([4.0] * 20_000)
    assert all(c == int(c) for c in counts)
    # Poisson: the mean and the variance are both the rate; the mean of 20,000 has sd 0.014.
    assert statistics.fmean(counts) == pytest.approx(4.0, abs=4 * math.sqrt(4.0 / 20_000))
    assert statistics.pvariance(counts) == pytest.approx(4.0, rel=0.05)


def test_the_same_seed_draws_the_same_day() -> None:
    assert Draws(7).arrivals([2.5] * 100) == Draws(7).arrivals([2.5] * 100)
    assert Draws(7).arrivals([2.5] * 100) != Draws(8).arrivals([2.5] * 100)


@pytest.mark.parametrize("duration", [0.6, 1.0, 2.5, 12.0])
def test_a_scrape_counts_the_requests_of_one_duration_a_poisson_count(duration: float) -> None:
    """Requests at Poisson instants, each running `duration` ticks: the number running at an instant
    is Poisson with mean rate x duration (M/D/infinity), whatever the scrape's phase in its tick."""
    rate, ticks = 4.0, 40_000
    draws = Draws(11)
    sampler = Sampler(draws, ticks)
    for k, n in enumerate(draws.arrivals([rate] * ticks)):
        sampler.record(k, n)
    reads = [sampler.running(k, duration) for k in range(20, ticks, 3)]
    mean = rate * duration
    assert statistics.fmean(reads) == pytest.approx(mean, abs=4 * math.sqrt(mean / len(reads)))
    # Reads 3 ticks apart overlap for long requests, so the variance is checked loosely: a mean served
    # as the value has none.
    assert statistics.pvariance(reads) == pytest.approx(mean, rel=0.15)


def test_one_replica_at_four_requests_a_second_reads_eight_one_scrape_in_twenty() -> None:
    """Issue 38's GPU day: at 4 req/s of 1 s requests a scrape read 9 in flight where the mean was 4.
    The chance of 8 or more is the Poisson tail, 5.1 %."""
    ticks = 60_000
    draws = Draws(5)
    sampler = Sampler(draws, ticks)
    for k, n in enumerate(draws.arrivals([4.0] * ticks)):
        sampler.record(k, n)
    reads = [sampler.running(k, 1.0) for k in range(15, ticks, 15)]
    share = sum(r >= 8 for r in reads) / len(reads)
    expected = _poisson_tail(4.0, 8)
    assert share == pytest.approx(expected, abs=4 * math.sqrt(expected * (1 - expected) / len(reads)))


def test_a_scrape_read_twice_reads_the_same_counts() -> None:
    """The value served at one refresh is one scrape: a second metric read from it (the guard) sees
    the same counts."""
    draws = Draws(2)
    sampler = Sampler(draws, 100)
    for k in range(100):
        sampler.record(k, 3.0)
    first = sampler.state(50, 2.0, 1.4, 2, 8.0, "service")
    assert first is not None
    assert all(sampler.state(50, 2.0, 1.4, 2, 8.0, "service") == first for _ in range(5))
    assert sampler.state(60, 2.0, 1.4, 0, 8.0, "service") is None


def test_a_least_in_flight_router_queues_only_when_every_pod_is_full() -> None:
    draws = Draws(1)
    assert draws.split(14.0, 2, 8.0, "least-inflight") == (14.0, 0.0)
    assert draws.split(19.0, 2, 8.0, "least-inflight") == (16.0, 3.0)


def test_behind_a_service_a_pod_queues_while_another_has_free_slots() -> None:
    """10 requests over 2 pods of 6 slots, each request to a pod at random: a pod holds 7 or more
    with probability P(Bin(10, 1/2) >= 7) x 2 = 34 %; the waiting read is its excess."""
    draws = Draws(4)
    reads = [draws.split(10.0, 2, 6.0, "service") for _ in range(4000)]
    assert all(r + w == 10.0 for r, w in reads)
    expected = sum(math.comb(10, k) / 2**10 * (max(0, k - 6) + max(0, 10 - k - 6)) for k in range(11))
    waiting = [w for _, w in reads]
    sd = math.sqrt(statistics.pvariance(waiting) / len(waiting))
    assert statistics.fmean(waiting) == pytest.approx(expected, abs=4 * sd)
    assert expected > 0.3
