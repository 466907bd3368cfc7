"""The prefill probe's order and fit, on TTFTs made by hand: a line with noise, a flat one, and a drift
over the probe that an ordered probe turns into its slope."""

from __future__ import annotations

import random

import pytest

from lab.profile.prefill import fit_prefill, probe_order

LENGTHS = [128, 256, 512, 1024]
COST = 20e-6  # seconds per prompt token: what the 8B engine's closed loop implies


def test_each_round_sends_every_length_once_in_an_order_the_seed_repeats() -> None:
    order = probe_order(LENGTHS, 7, seed=3)
    rounds = [order[i : i + 4] for i in range(0, len(order), 4)]
    assert all(sorted(r) == LENGTHS for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1, "every round in one order is an ordered probe again"
    assert probe_order(LENGTHS, 7, seed=3) == order
    assert probe_order(LENGTHS, 7, seed=4) != order


def test_a_cost_in_the_noise_of_a_request_alone_is_resolved_with_its_interval() -> None:
    noise = random.Random(1)
    points = [(float(n), 0.018 + COST * n + noise.gauss(0, 0.002)) for n in probe_order(LENGTHS, 6, 0)]
    fit = fit_prefill(points)
    assert fit is not None and fit.resolved
    assert fit.low < COST < fit.high
    assert fit.seconds_per_token == pytest.approx(COST, rel=0.2)
    assert fit.describe(28).startswith("prefill: 20")


def test_a_slope_whose_interval_holds_zero_is_not_resolved_and_says_so() -> None:
    noise = random.Random(2)
    points = [(float(n), 0.030 + noise.gauss(0, 0.004)) for n in probe_order(LENGTHS, 6, 0)]
    fit = fit_prefill(points)
    assert fit is not None and not fit.resolved
    assert fit.low < 0 < fit.high
    assert "not resolved" in fit.describe(28) and "no prefill cost" in fit.describe(28)


def test_a_drift_over_the_probe_hides_the_cost_when_ordered_and_not_when_interleaved() -> None:
    """The probe starts 20 ms slower and the excess fades over it (a GPU clocking up from idle): sent
    short to long, the drift lands on the short prompts and cancels the slope; interleaved, every
    length shares it."""

    def measured(order: list[int]) -> list[tuple[float, float]]:
        return [(float(n), 0.018 + COST * n + 0.020 * (1 - i / len(order))) for i, n in enumerate(order)]

    ordered = fit_prefill(measured(sorted(LENGTHS * 6)))
    interleaved = fit_prefill(measured(probe_order(LENGTHS, 6, seed=0)))
    assert ordered is not None and interleaved is not None
    assert ordered.seconds_per_token < 0.6 * COST
    assert interleaved.seconds_per_token == pytest.approx(COST, rel=0.25)


def test_too_few_points_or_one_length_fit_nothing() -> None:
    assert fit_prefill([(128.0, 0.02), (1024.0, 0.04)]) is None
    assert fit_prefill([(128.0, 0.02)] * 5) is None
