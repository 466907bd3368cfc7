"""Order statistics and the least-squares line of measured samples, one definition for the demo, the
profile and the backtest."""

from __future__ import annotations

import math
from collections.abc import Sequence


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


def linear_fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares (intercept, slope) of y over x; `None` with fewer than two distinct x."""
    if len({x for x, _y in points}) < 2:
        return None
    n = len(points)
    mean_x = sum(x for x, _y in points) / n
    mean_y = sum(y for _x, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _y in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    return mean_y - slope * mean_x, slope
