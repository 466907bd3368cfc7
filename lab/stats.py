"""Order statistics, Student's t and the least-squares line of measured samples, one definition for
the demo, the profile and the backtest."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

# Student's t, two-sided 95 %, by degrees of freedom (1-10); beyond, the normal's 1.96 is close enough.
_T95: Final = (12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23)


def t95(degrees: int) -> float:
    """Student's two-sided 95 % quantile for `degrees` degrees of freedom."""
    if degrees < 1:
        return math.inf
    return _T95[degrees - 1] if degrees <= len(_T95) else 1.96


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (`inf` allowed)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    if ordered[high] == math.inf:
        return math.inf if position > low or ordered[low] == math.inf else ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _least_squares(points: Sequence[tuple[float, float]]) -> tuple[float, float, float] | None:
    """(intercept, slope, spread of x about its mean) of the least-squares line; `None` with fewer
    than two distinct x."""
    if len({x for x, _y in points}) < 2:
        return None
    n = len(points)
    mean_x = sum(x for x, _y in points) / n
    mean_y = sum(y for _x, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _y in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    return mean_y - slope * mean_x, slope, spread


def linear_fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares (intercept, slope) of y over x; `None` with fewer than two distinct x."""
    fit = _least_squares(points)
    return None if fit is None else fit[:2]


def slope_interval(points: Sequence[tuple[float, float]]) -> tuple[float, float, float] | None:
    """The least-squares slope of y over x with its two-sided 95 % t interval: (slope, low, high);
    `None` with fewer than three points or two distinct x (no residual to estimate its error from)."""
    fit = _least_squares(points)
    if fit is None or len(points) < 3:
        return None
    intercept, slope, spread = fit
    n = len(points)
    residual = sum((y - intercept - slope * x) ** 2 for x, y in points) / (n - 2)
    half = t95(n - 2) * math.sqrt(residual / spread)
    return slope, slope - half, slope + half
