"""The knee and the curves read off a profile's steps.

The knee is the highest offered rate that held the SLO with a stable queue, below every rate that
did not: a rate that passed above a failure is noise, not capacity. Without a failing step above
the passing ones the knee is not known (it lies higher than the profile went), and is `None`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from lab.profile.schema import Knee, Step
from lab.profile.steps import percentile_key


def held(step: Step) -> bool:
    """Whether a step held the SLO with a stable queue."""
    return step.slo_met and step.queue_stable


def rate_steps(steps: Sequence[Step]) -> list[Step]:
    """The open-loop steps, by offered rate."""
    return sorted((s for s in steps if s.kind == "rate"), key=lambda s: s.offered_rate)


def knee_step(steps: Sequence[Step]) -> Step | None:
    """The step at the knee, or `None` while no rate above a held one has failed."""
    ordered = rate_steps(steps)
    failed = [s.offered_rate for s in ordered if not held(s)]
    if not failed:
        return None
    below = [s for s in ordered if held(s) and s.offered_rate < min(failed)]
    return below[-1] if below else None


def find_knee(steps: Sequence[Step], percentile: float) -> Knee | None:
    """The knee (its latencies at the SLO's percentile), or `None` when the steps do not bracket it."""
    step = knee_step(steps)
    if step is None:
        return None
    key = percentile_key(percentile)
    return Knee(
        rate=step.offered_rate,
        concurrency=step.concurrency,
        kv_usage=step.kv_usage,
        ttft_seconds=step.ttft_seconds[key],
        tpot_seconds=step.tpot_seconds[key],
    )


def tpot_vs_batch(steps: Sequence[Step]) -> tuple[tuple[float, float], ...]:
    """(mean running, mean TPOT) of the concurrency steps, by batch size: the server's own mean TPOT
    where it reported one (exact), else the client's.

    Closed-loop steps only: there the batch holds at the clients' count, so a request's TPOT is that
    batch's. Under open-loop arrivals the batch swings, and a request spends more of its life in the
    larger batches (the busy periods) than the time-averaged batch says, which would bend the curve.
    Rate steps count only when fewer than two concurrency steps exist.
    """
    closed = [s for s in steps if s.kind == "concurrency"]
    points = []
    for step in closed if len(closed) >= 2 else steps:
        tpot = step.server_tpot_seconds or step.tpot_seconds.get("mean")
        if step.running > 0 and tpot:
            points.append((step.running, tpot))
    return tuple(sorted(points))


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


def interpolate(points: Sequence[tuple[float, float]], x: float) -> float:
    """y at `x` on the polyline through `points` (sorted by x), held flat beyond its ends."""
    if not points:
        raise ValueError("unable to interpolate: no points")
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
    return points[-1][1]
