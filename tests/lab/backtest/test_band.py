"""A prediction is a band (`lab.backtest.band`): seeded replays, where the HPA reads samples.

Issue 38's held-out day on two H200s: at 4 req/s on one replica the adapter read 9 in flight (the
mean was near 4), the HPA asked for a second replica, and the fluid backtest, which reads the mean,
never did. These tests replay that regime: the fluid replay never scales on the quiet hour, seeded
replays do on most seeds, and a smoothing window takes the noise out again.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from lab.backtest.band import Band, Spread, coverage, replay
from lab.backtest.calibration import Estimate, ServiceModel
from lab.backtest.decision import Rules, decide
from lab.backtest.history import History
from lab.backtest.outcome import outcome
from lab.backtest.policy import Policy
from lab.backtest.simulate import simulate
from lab.hpa import Behavior, ScalingRules
from lab.slo import Slo

# The KV-bound 8B engine's shape: 11.5 req/s saturated, a batch of 32; a request lasts ~1 s alone.
MODEL = ServiceModel(capacity=11.5, slots=32.0, ttft_base=0.05, output_tokens=128.0, kv_per_request=0.03)
SLO = Slo(ttft=0.5, tpot=0.05)
# The recommended in-flight target of the GPU rehearsal, 1-2 replicas, a 120 s scale-down window.
POLICY = Policy(
    "inflight-6.6",
    metric="vllm_requests_inflight",
    target=6.6,
    min_replicas=1,
    max_replicas=2,
    cold_start=60.0,
    behavior=Behavior(scale_down=ScalingRules(stabilization_window_seconds=120)),
)
QUIET = History(step=1.0, arrivals=(4.0,) * 1200, source="20 quiet minutes at 4 req/s")


def test_the_fluid_replay_reads_the_mean_and_never_scales_on_a_quiet_hour() -> None:
    """5.4 in flight on average (4 req/s of 1.3 s requests) reads 5.4 every time: below 6.6 x 1.1."""
    assert MODEL.batch_at(4.0) == pytest.approx(5.4, abs=0.1)
    assert simulate(POLICY, MODEL, QUIET, SLO).scale_events == 0


def test_seeded_replays_read_samples_and_scale_on_the_noise() -> None:
    """A read of 8 or more (8 / 6.6 > 1 + tolerance) asks for a second replica: with 5.4 in flight
    that is 17 % of syncs (Poisson), and there are 80 syncs in 20 minutes: every seed scales."""
    events = [simulate(POLICY, MODEL, QUIET, SLO, seed=s).scale_events for s in range(10)]
    assert all(e > 0 for e in events), events


def test_a_smoothing_window_averages_most_of_the_noise_away() -> None:
    """One scrape's count varies with a standard deviation of 2.6 requests here (measured: Poisson's
    2.3 and the batch's own effect on a request's duration); the mean of 30 one-second scrapes by
    0.65, what the arrivals' own count over 30 s varies (120 +- 11 requests). The 7.3 that scales is
    0.7 standard deviations above the mean for one scrape and 2.7 for the window: the window leaves
    a few scale-ups on a true 30 s burst, far fewer than single scrapes."""
    smooth = replace(POLICY, smoothing=30.0)
    single = sum(simulate(POLICY, MODEL, QUIET, SLO, seed=s).scale_events for s in range(10))
    averaged = sum(simulate(smooth, MODEL, QUIET, SLO, seed=s).scale_events for s in range(10))
    assert averaged * 3 < single, (averaged, single)


def test_every_policy_meets_the_same_days() -> None:
    """Seeds draw the arrivals before the policy acts: two policies on seed 3 serve the same requests."""
    a = simulate(POLICY, MODEL, QUIET, SLO, seed=3)
    b = simulate(replace(POLICY, target=20.0), MODEL, QUIET, SLO, seed=3)
    assert a.arrived == b.arrived != simulate(POLICY, MODEL, QUIET, SLO, seed=4).arrived


def test_a_band_is_the_median_and_range_of_the_seeds() -> None:
    step = History(step=1.0, arrivals=(4.0,) * 300 + (10.5,) * 300, source="a step")
    band = replay(POLICY, MODEL, step, SLO, seeds=7)
    slos = sorted(c.slo_attainment for c in band.cards)
    assert band.seeds == 7 and band.slo == Spread(slos[3], slos[0], slos[-1])
    card = band.median_card()
    assert card.slo_attainment == slos[3]
    assert card.replica_minutes == sorted(c.replica_minutes for c in band.cards)[3]
    assert band.coverage == pytest.approx(6 / 8)


def test_coverage_of_the_range_of_n_seeds() -> None:
    """One more draw falls outside the range of n with probability 2/(n+1) (its rank is uniform)."""
    assert coverage(10) == pytest.approx(9 / 11)
    assert coverage(99) == pytest.approx(0.98)
    assert coverage(1) == 0.0


def _judge(band_slos: list[float]) -> tuple[str, str]:
    card = outcome(simulate(POLICY, MODEL, QUIET, SLO), MODEL, SLO)
    cards = [replace(card, slo_attainment=s) for s in band_slos]
    band = Band.of(cards)
    point = band.median_card()
    decision = decide(
        [POLICY],
        [(point, point, point)],
        Estimate(11.5, 11.5, 11.5, "given"),
        Rules(),
        requests=10_000,
        gap_share=0.0,
        bands=[band],
    )
    judged = decision.judged[0]
    return judged.verdict, judged.reason


def test_supported_only_where_the_worst_seed_meets_the_slo() -> None:
    verdict, reason = _judge([0.999, 0.995, 0.992, 1.0])
    assert verdict == "supported" and "all 4 seeds" in reason


def test_a_policy_that_holds_only_with_a_lucky_sample_is_open() -> None:
    verdict, reason = _judge([1.0, 0.999, 0.80, 1.0, 0.995])
    assert verdict == "open"
    assert "80.0 % on the worst" in reason and "luckiest of 5 seeds" in reason


def test_missing_on_every_seed_is_rejected() -> None:
    verdict, _ = _judge([0.95, 0.97, 0.9])
    assert verdict == "rejected"
