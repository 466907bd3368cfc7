"""A prediction is a band: one policy over one trace, replayed on many seeds of arrivals and scrapes.

A real day is one draw: the requests arrive at Poisson instants and the HPA reads whatever its scrape
counted, so two days with the same traffic can scale apart by one sync (issue 38's held-out day: a
reading of 9 where the mean was 4 bought a replica 15 s before a ramp, and twenty points of SLO).
`replay` runs the policy on `seeds` seeded replays (`simulate(seed=...)`, the same seeds for every
policy, so policies meet the same days) and `Band` keeps each outcome's median and range.

The band is the **range** of the seeds' outcomes: for one more day drawn from the same traffic, the
chance that it falls outside the range of `n` seeds is 2 / (n + 1), whatever the distribution (the
new day's rank among the n + 1 is uniform), so 10 seeds cover a day 82 % of the time and 99 seeds
98 % (`coverage`). Its low end is the worst seed: a policy is supported only where even that seed
meets the SLO (`lab.backtest.decision`), so a policy that holds only with a lucky sample is not.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from lab.backtest.calibration import ServiceModel
from lab.backtest.fleet import Router
from lab.backtest.history import History
from lab.backtest.outcome import Scorecard, outcome
from lab.backtest.policy import Policy
from lab.backtest.simulate import simulate
from lab.slo import Slo

#: Seeds a decision replays each policy on (the worst of ten meets the SLO: one day in eleven may not).
DECISION_SEEDS: Final = 10


def coverage(seeds: int) -> float:
    """The chance that one more day's outcome falls within the range of `seeds` seeds' outcomes."""
    return (seeds - 1) / (seeds + 1) if seeds > 1 else 0.0


@dataclass(frozen=True)
class Spread:
    """One quantity over the seeds: its median and range."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The median and range of `values` (at least one)."""
        return cls(statistics.median(values), min(values), max(values))

    def holds(self, value: float, *, tolerance: float = 1e-9) -> bool:
        """`value` lies within the range."""
        return self.low - tolerance <= value <= self.high + tolerance

    def text(self, scale: float = 1.0, digits: int = 1) -> str:
        """`99.2 (97.0-100.0)`: the median, then the range."""
        return (
            f"{self.median * scale:.{digits}f} ({self.low * scale:.{digits}f}-{self.high * scale:.{digits}f})"
        )


@dataclass(frozen=True)
class Band:
    """A policy's outcomes over the seeds."""

    seeds: int
    slo: Spread
    replica_minutes: Spread
    ttft_p90: Spread | None
    cards: tuple[Scorecard, ...]

    @classmethod
    def of(cls, cards: Sequence[Scorecard]) -> Band:
        """The band of the seeds' scorecards."""
        p90 = [c.ttft_p90 for c in cards if c.ttft_p90 is not None]
        return cls(
            len(cards),
            Spread.of([c.slo_attainment for c in cards]),
            Spread.of([c.replica_minutes for c in cards]),
            Spread.of(p90) if p90 else None,
            tuple(cards),
        )

    @property
    def coverage(self) -> float:
        """The chance that one more day falls within the range (`coverage`)."""
        return coverage(self.seeds)

    def median_card(self) -> Scorecard:
        """The table's row: every number the median over the seeds (counts rounded)."""
        cards = self.cards
        first = cards[0]
        medians: dict[str, object] = {}
        for f in dataclasses.fields(Scorecard):
            value = getattr(first, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            values = [getattr(c, f.name) for c in cards]
            if any(v is None for v in values):
                continue
            middle = statistics.median(values)
            medians[f.name] = round(middle) if isinstance(value, int) else float(middle)
        return dataclasses.replace(first, **medians)  # type: ignore[arg-type]


def replay(
    policy: Policy,
    model: ServiceModel,
    history: History,
    slo: Slo,
    *,
    seeds: int,
    resolution: float = 1.0,
    planned_capacity: float | None = None,
    router: Router = "service",
    gpus_per_replica: float = 1.0,
    first_seed: int = 0,
) -> Band:
    """`policy` on `seeds` seeded replays of `history` (seeds `first_seed`, `first_seed + 1`, ...)."""
    cards = [
        outcome(
            simulate(
                policy,
                model,
                history,
                slo,
                resolution=resolution,
                planned_capacity=planned_capacity,
                seed=seed,
                router=router,
            ),
            model,
            slo,
            gpus_per_replica=gpus_per_replica,
        )
        for seed in range(first_seed, first_seed + seeds)
    ]
    return Band.of(cards)
