"""Student's t and the least-squares slope with its interval (`lab.stats`)."""

from __future__ import annotations

import math
import random

import pytest

from lab.stats import slope_interval, t95


def test_t95_is_students_quantile_then_the_normals() -> None:
    assert t95(1) == pytest.approx(12.71) and t95(7) == pytest.approx(2.36)
    assert t95(30) == 1.96 and math.isinf(t95(0))


def test_points_on_a_line_give_its_slope_with_no_spread() -> None:
    fit = slope_interval([(x, 2.0 + 0.5 * x) for x in (1.0, 2.0, 4.0, 8.0)])
    assert fit is not None
    assert fit == pytest.approx((0.5, 0.5, 0.5))


def test_the_interval_holds_the_true_slope_of_noisy_points_and_narrows_with_more() -> None:
    rng = random.Random(3)
    few = [(x, 0.5 * x + rng.gauss(0.0, 1.0)) for x in range(6)]
    many = [(x % 6, 0.5 * (x % 6) + rng.gauss(0.0, 1.0)) for x in range(600)]
    coarse, fine = slope_interval(few), slope_interval(many)
    assert coarse is not None and fine is not None
    assert coarse[1] < 0.5 < coarse[2] and fine[1] < 0.5 < fine[2]
    assert fine[2] - fine[1] < (coarse[2] - coarse[1]) / 3


def test_no_interval_without_a_residual() -> None:
    """Two points fit any line exactly; one x value has no slope."""
    assert slope_interval([(1.0, 1.0), (2.0, 3.0)]) is None
    assert slope_interval([(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]) is None
