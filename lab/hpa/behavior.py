"""Stabilization and rate limits: what `horizontal.go` does between the metrics' proposal and the new count.

* Legacy path (no `behavior`): `stabilizeRecommendation` keeps the highest recommendation of the
  downscale window, `convertDesiredReplicasWithRules` clamps to [min, max] and to
  max(factor × current, minimum) per sync.
* `behavior` path: `stabilizeRecommendationWithBehaviors` bounds the count by the lowest
  recommendation of the scale-up window and the highest of the scale-down window;
  `convertDesiredReplicasWithBehaviorRate` applies Pods/Percent policies over past scale events.

The histories are kept the controller's way: a stale entry is overwritten by the next one (the last
stale one found) rather than deleted, and scale events older than the longest policy period of their
direction are only marked outdated. They still count for the other direction's policies when those
have longer periods, which is why the model keeps them as Kubernetes does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lab.hpa.spec import ScalingRules

Direction = Literal["up", "down"]


@dataclass
class Recommendation:
    """`timestampedRecommendation`: a metrics proposal before stabilization, and when it was made."""

    replicas: int
    time: float


@dataclass
class ScaleEvent:
    """`timestampedScaleEvent`: how many replicas one rescale added or removed (always >= 0)."""

    change: int
    time: float
    outdated: bool = False


def stabilize(log: list[Recommendation], now: float, window: float, proposal: int) -> int:
    """`stabilizeRecommendation`: the highest recommendation made within `window` seconds (inclusive),
    `proposal` included; records `proposal` in `log`."""
    highest = proposal
    stale = None
    for index, recommendation in enumerate(log):
        if recommendation.time < now - window:
            stale = index
        else:
            highest = max(highest, recommendation.replicas)
    _record(log, stale, Recommendation(proposal, now))
    return highest


def stabilize_with_behavior(
    log: list[Recommendation], now: float, up_window: float, down_window: float, current: int, proposal: int
) -> tuple[int, str]:
    """`stabilizeRecommendationWithBehaviors`: `current` moved at most to the lowest recommendation of
    the scale-up window and at least to the highest of the scale-down window (both exclusive of their
    start). Returns the count and the reason `AbleToScale` gets when it differs from `proposal`."""
    up_cutoff, down_cutoff = now - up_window, now - down_window
    lowest = highest = proposal
    stale = None
    for index, recommendation in enumerate(log):
        if recommendation.time > up_cutoff:
            lowest = min(lowest, recommendation.replicas)
        if recommendation.time > down_cutoff:
            highest = max(highest, recommendation.replicas)
        if recommendation.time < up_cutoff and recommendation.time < down_cutoff:
            stale = index
    stabilized = min(max(current, lowest), highest)
    _record(log, stale, Recommendation(proposal, now))
    return stabilized, "ScaleUpStabilized" if proposal >= current else "ScaleDownStabilized"


def _record(log: list[Recommendation], stale: int | None, recommendation: Recommendation) -> None:
    if stale is None:
        log.append(recommendation)
    else:
        log[stale] = recommendation


def convert_with_rules(
    current: int, desired: int, minimum: int, maximum: int, factor: float = 2.0, floor: float = 4.0
) -> tuple[int, str]:
    """`convertDesiredReplicasWithRules`: clamp to [minimum, maximum] and to the legacy scale-up limit
    max(factor × current, floor), which caps a burst of bogus readings (kubernetes#32304)."""
    scale_up_limit = int(max(factor * current, floor))
    if maximum > scale_up_limit:
        allowed, reason = scale_up_limit, "ScaleUpLimit"
    else:
        allowed, reason = maximum, "TooManyReplicas"
    if desired < minimum:
        return minimum, "TooFewReplicas"
    if desired > allowed:
        return allowed, reason
    return desired, "DesiredWithinRange"


def change_in_period(events: Sequence[ScaleEvent], period: float, now: float) -> int:
    """`getReplicasChangePerPeriod`: replicas changed by the events of the last `period` seconds."""
    return sum(event.change for event in events if event.time > now - period)


def rate_limit(
    direction: Direction,
    current: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: ScalingRules,
    now: float,
) -> int:
    """The furthest count the policies allow now: `calculateScaleUpLimitWithScalingRules` (up) or
    `calculateScaleDownLimitWithBehaviors` (down). `rules` must be completed with defaults."""
    if rules.select_policy == "Disabled":
        return current
    proposals = []
    for policy in rules.policies or ():
        start = (
            current
            - change_in_period(up_events, policy.period_seconds, now)
            + change_in_period(down_events, policy.period_seconds, now)
        )
        if policy.type == "Pods":
            proposals.append(start + policy.value if direction == "up" else start - policy.value)
        elif direction == "up":
            # Rounded up, or a small target could never grow by a percentage.
            proposals.append(math.ceil(float(start) * (1 + float(policy.value) / 100)))
        else:
            # Go's int32() truncates, which rounds the number of removed pods up.
            proposals.append(int(float(start) * (1 - float(policy.value) / 100)))
    if not proposals:
        return current
    # "Max" is the policy allowing the biggest change: the highest count up, the lowest down.
    biggest_change = max if direction == "up" else min
    smallest_change = min if direction == "up" else max
    return (smallest_change if rules.select_policy == "Min" else biggest_change)(proposals)


def convert_with_behavior_rate(
    current: int,
    desired: int,
    minimum: int,
    maximum: int,
    up: ScalingRules,
    down: ScalingRules,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    now: float,
) -> tuple[int, str]:
    """`convertDesiredReplicasWithBehaviorRate`: the policies' limit (never past `current` in the
    wrong direction) and [minimum, maximum], with the `ScalingLimited` reason."""
    if desired > current:
        limit = max(rate_limit("up", current, up_events, down_events, up, now), current)
        allowed, reason = (limit, "ScaleUpLimit") if maximum > limit else (maximum, "TooManyReplicas")
        if desired > allowed:
            return allowed, reason
    elif desired < current:
        limit = min(rate_limit("down", current, up_events, down_events, down, now), current)
        allowed, reason = (limit, "ScaleDownLimit") if minimum < limit else (minimum, "TooFewReplicas")
        if desired < allowed:
            return allowed, reason
    return desired, "DesiredWithinRange"


def store_scale_event(events: list[ScaleEvent], rules: ScalingRules | None, now: float, change: int) -> None:
    """`storeScaleEvent` for one direction: nothing without `behavior`; otherwise mark the events older
    than the longest policy period outdated and overwrite the last of them, or append."""
    if rules is None:
        return
    longest = max((policy.period_seconds for policy in rules.policies or ()), default=0)
    stale = None
    for index, event in enumerate(events):
        if event.time < now - longest:
            event.outdated = True
        if event.outdated:
            stale = index
    new = ScaleEvent(change, now)
    if stale is None:
        events.append(new)
    else:
        events[stale] = new
