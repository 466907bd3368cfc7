"""The knee and the curves read off a profile's steps.

A rate measured more than once is judged by its longest measurement (the latest of equal length):
the profile measures longer exactly when two measurements disagree, so the longest is the one that
decided. The knee is the highest offered rate that held (its verdict, `lab.profile.verdict`), below
every rate that did not: a rate that passed above a failure is noise, not capacity. The lowest rate
that failed closes the knee's band. Without a failing step above the passing ones the knee is not
known (it lies higher than the profile went), and is `None`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Final

from lab.profile.schema import Knee, Step
from lab.profile.steps import percentile_key


def held(step: Step) -> bool:
    """Whether a step held the SLO with a stable queue (its verdict; files from before verdicts:
    the SLO met and the queue stable)."""
    if step.verdict is not None:
        return step.verdict == "held"
    return step.slo_met and step.queue_stable


def rate_steps(steps: Sequence[Step]) -> list[Step]:
    """The open-loop steps, by offered rate."""
    return sorted((s for s in steps if s.kind == "rate"), key=lambda s: s.offered_rate)


def rate_verdicts(steps: Sequence[Step]) -> list[Step]:
    """One step per offered rate, the one that decides it: the longest; of equal length (within
    `_SAME_LENGTH`) a decided one before one that ended marginal (undecided at its longest); then the
    latest."""
    deciding: dict[float, Step] = {}
    for step in (s for s in steps if s.kind == "rate"):
        known = deciding.get(step.offered_rate)
        if known is None or _decides_over(step, known):
            deciding[step.offered_rate] = step
    return [deciding[rate] for rate in sorted(deciding)]


# Two steps sized by one plan measure windows that differ by the float arithmetic of clock readings
# (64.11169792697328 s against 64.1116979269733 s on an emulator): equal lengths, not a longer one.
# Compared exactly, the marginal repeat of a decided step was "longer" and failed the knee's rate in
# the report, where the search had let the decided step stand.
_SAME_LENGTH: Final = 1e-6


def _decides_over(step: Step, known: Step) -> bool:
    """Whether `step` decides its rate rather than `known`, the step that did so far."""
    length, before = step.window_seconds or 0.0, known.window_seconds or 0.0
    if abs(length - before) <= _SAME_LENGTH * max(length, before):
        return (not step.marginal) >= (not known.marginal)
    return length > before


def bracket(steps: Sequence[Step]) -> tuple[Step | None, float | None]:
    """The deciding step of the highest rate that held below every rate that failed (`None` where
    none did), and the lowest rate that failed (`None` where none did): the knee's band as any set
    of open-loop steps reads it, a profile's search or a sweep of fixed steps."""
    ordered = rate_verdicts(steps)
    failed = failed_rate(steps)
    below = [s for s in ordered if held(s) and (failed is None or s.offered_rate < failed)]
    return (below[-1] if below else None), failed


def knee_step(steps: Sequence[Step]) -> Step | None:
    """The step at the knee, or `None` while no rate above a held one has failed."""
    step, failed = bracket(steps)
    return step if failed is not None else None


def failed_rate(steps: Sequence[Step]) -> float | None:
    """The lowest offered rate whose deciding step did not hold."""
    return min((s.offered_rate for s in rate_verdicts(steps) if not held(s)), default=None)


def plateau(points: Sequence[tuple[float, bool]]) -> tuple[float, float, float]:
    """The saturated throughput fitted across closed-loop steps: (mean, lowest, highest) of the
    throughputs measured with a standing queue (`points`: throughput, queue stood), or, where fewer
    than two stood, of those within 5 % of the highest (a server whose queue the gauge hides)."""
    if not points:
        raise ValueError("unable to fit a plateau: no closed-loop steps")
    on = [t for t, standing in points if standing]
    if len(on) < 2:
        top = max(t for t, _standing in points)
        on = [t for t, _standing in points if t >= 0.95 * top]
    return sum(on) / len(on), min(on), max(on)


def isotonic(points: Sequence[tuple[float, float, float]]) -> list[tuple[float, float]]:
    """The non-decreasing least-squares fit of (x, y, weight) points (pool adjacent violators):
    (x, fitted y) at each x, sorted. A monotone curve through noisy steps: no single step decides
    a value, and the value never falls as load rises."""
    blocks: list[list[float]] = []  # [weighted sum, weight, first index, last index]
    ordered = sorted(points)
    for i, (_x, y, w) in enumerate(ordered):
        blocks.append([y * w, w, i, i])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, weight, _first, last = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += weight
            blocks[-1][3] = last
    fitted = [0.0] * len(ordered)
    for total, weight, first, last in blocks:
        for i in range(int(first), int(last) + 1):
            fitted[i] = total / weight
    return [(x, fitted[i]) for i, (x, _y, _w) in enumerate(ordered)]


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
        failed_rate=failed_rate(steps),
        measurements=sum(1 for s in steps if s.kind == "rate" and s.offered_rate == step.offered_rate),
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
