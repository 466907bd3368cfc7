"""Headroom as a sweep dimension: the anticipating policy with its target lowered, for days that need it.

The anticipating policy sizes the fleet at the knee (its target is the knee's rate per replica over
1 + tolerance). Where traffic rises faster than a sync period plus a cold start (a step nothing
announces), replicas sized at the knee arrive too late, and only spare capacity kept before the rise
holds the SLO. A lower target keeps that spare capacity in proportion to the load (unlike a
`minReplicas` floor, paid all day at any load); the decision then picks the least of it that holds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from lab.backtest.policy import FORECAST, Policy

#: Shares of the anticipating target to try: 10 % to 50 % of headroom below the knee.
HEADROOM_FACTORS: Final = (0.9, 0.8, 0.7, 0.6, 0.5)


def with_headroom(policies: list[Policy], factors: tuple[float, ...] = HEADROOM_FACTORS) -> list[Policy]:
    """`policies`, then each anticipating one again at every share of its target in `factors`
    (named `anticipate-x0.7` and the like), before the baselines, which stay last."""
    candidates = [p for p in policies if p.candidate and not p.baseline]
    variants = [
        replace(p, name=f"{p.name}-x{f:g}", target=round(p.target * f, 3))
        for p in candidates
        if p.kind == "hpa" and p.metric == FORECAST
        for f in factors
    ]
    rest = [p for p in policies if p not in candidates]
    return [*candidates, *variants, *rest]
