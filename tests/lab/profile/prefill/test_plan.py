"""The prefill probe's plan and fit, on times made by hand: a line with noise, a flat one, a drift over
the probe that an ordered probe turns into its slope, and the burst sizes a server holds."""

from __future__ import annotations

import random

import pytest

from lab.profile.prefill.plan import burst_sizes, fit_prefill, probe_order

PROMPT = 1024
SIZES = [1, 2, 4, 8]
LENGTHS = [k * PROMPT for k in SIZES]  # a burst's prompt tokens
# seconds per prompt token in a step: the 8B engine's bursts
# (runs/2026-11-26-real-vllm-0.26.0-h200/.../prefill/burst.txt)
COST = 23e-6


def test_each_round_sends_every_size_once_in_an_order_the_seed_repeats() -> None:
    order = probe_order(SIZES, 7, seed=3)
    rounds = [order[i : i + 4] for i in range(0, len(order), 4)]
    assert all(sorted(r) == SIZES for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1, "every round in one order is an ordered probe again"
    assert probe_order(SIZES, 7, seed=3) == order
    assert probe_order(SIZES, 7, seed=4) != order


def test_bursts_fit_the_servers_slots_and_its_kv_cache() -> None:
    assert burst_sizes(32, PROMPT, 4096 * 16) == SIZES
    assert burst_sizes(3, 128, 2048 * 16) == [1, 2], "three slots hold no burst of four"
    assert burst_sizes(32, PROMPT, 768 * 16) == SIZES, "8 x 1,026 tokens fit 12,288 with room"
    assert burst_sizes(32, PROMPT, 384 * 16) == [1, 2, 4], "8 x 1,026 tokens would not fit 6,144"
    assert burst_sizes(32, PROMPT, None) == SIZES


def test_a_cost_in_the_noise_of_a_request_alone_is_resolved_with_its_interval() -> None:
    noise = random.Random(1)
    points = [(float(n), 0.008 + COST * n + noise.gauss(0, 0.003)) for n in probe_order(LENGTHS, 6, 0)]
    fit = fit_prefill(points)
    assert fit is not None and fit.resolved
    assert fit.low < COST < fit.high
    assert fit.seconds_per_token == pytest.approx(COST, rel=0.2)
    assert fit.describe(28).startswith("prefill: 2") and "per prompt token in a step" in fit.describe(28)


def test_a_slope_whose_interval_holds_zero_is_not_resolved_and_says_so() -> None:
    noise = random.Random(2)
    points = [(float(n), 0.030 + noise.gauss(0, 0.030)) for n in probe_order(LENGTHS, 6, 0)]
    fit = fit_prefill(points)
    assert fit is not None and not fit.resolved
    assert fit.low < 0 < fit.high
    assert "not resolved" in fit.describe(28) and "no prefill cost" in fit.describe(28)


def test_a_drift_over_the_probe_hides_the_cost_when_ordered_and_not_when_interleaved() -> None:
    """The probe starts 150 ms slower and the excess fades over it (a GPU clocking up from idle): sent
    small to large, the drift lands on the small bursts and cancels the slope; interleaved, every size
    shares it."""

    def measured(order: list[int]) -> list[tuple[float, float]]:
        return [(float(n), 0.008 + COST * n + 0.150 * (1 - i / len(order))) for i, n in enumerate(order)]

    ordered = fit_prefill(measured(sorted(LENGTHS * 6)))
    interleaved = fit_prefill(measured(probe_order(LENGTHS, 6, seed=0)))
    assert ordered is not None and interleaved is not None
    assert ordered.seconds_per_token < 0.6 * COST
    assert interleaved.seconds_per_token == pytest.approx(COST, rel=0.25)


def test_too_few_points_or_one_length_fit_nothing() -> None:
    assert fit_prefill([(128.0, 0.02), (1024.0, 0.04)]) is None
    assert fit_prefill([(128.0, 0.02)] * 5) is None
