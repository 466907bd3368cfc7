"""The evidence-gated decision: each candidate `supported`, `rejected` or `open`, with its reason.

A candidate is judged three times: at the capacity estimate and at both ends of its uncertainty band
(`Estimate.low`, `Estimate.high`), so a verdict holds for every capacity the data allows:

* **open** when the window cannot carry a verdict (fewer than `min_requests` requests, or gaps over
  more than `max_gap_share` of the range), or when the SLO is met at the estimate's optimistic end
  but not at its pessimistic end (the capacity's uncertainty decides);
* **rejected** when the SLO is missed even at the optimistic end, or when it is met at a cost above
  `max_cost_ratio` times the cheapest supported candidate's;
* **supported** when the SLO is met even at the pessimistic end.

With a band (`lab.backtest.band`: the policy replayed on seeds of arrivals and scrapes, as the HPA
reads samples on a real fleet), each verdict also holds for every seed: **supported** needs the worst
seed to meet the SLO, **rejected** the best to miss it; where seeds disagree the verdict is **open**
(a lucky sample decides), and the table's numbers are the seeds' medians.

The recommendation is the cheapest supported candidate (fewer scale events breaking a tie). The
foresight bound is not a candidate: it is reported as a `reference`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from lab.backtest.band import Band
from lab.backtest.calibration import Estimate
from lab.backtest.outcome import Scorecard
from lab.backtest.policy import Policy

Verdict = Literal["supported", "rejected", "open", "reference"]
VERDICTS: Final = ("supported", "rejected", "open")


@dataclass(frozen=True)
class Rules:
    """What counts as evidence."""

    slo_attainment: float = 0.99
    """Share of requests that must meet both latency objectives."""
    min_requests: int = 1000
    """Fewer requests in the window than this decide nothing."""
    max_gap_share: float = 0.1
    """A range whose gaps cover more than this share decides nothing."""
    max_cost_ratio: float = 1.5
    """A supported candidate costing more than this times the cheapest supported one is rejected."""


@dataclass(frozen=True)
class Judged:
    """One policy with its verdict and the three outcomes behind it."""

    policy: Policy
    verdict: Verdict
    reason: str
    point: Scorecard
    pessimistic: Scorecard
    optimistic: Scorecard
    band: Band | None = None
    """The outcomes over the seeds at the capacity estimate (`None`: one fluid replay)."""


@dataclass(frozen=True)
class Decision:
    """Every policy judged, and the one recommended (if any is supported)."""

    judged: tuple[Judged, ...]
    recommended: Judged | None
    rules: Rules

    def count(self, verdict: Verdict) -> int:
        """How many policies got `verdict`."""
        return sum(1 for j in self.judged if j.verdict == verdict)

    @property
    def foresight(self) -> Judged | None:
        """The foresight bound: the denominator of every cost ratio (`None` when it was not run)."""
        return next((j for j in self.judged if j.policy.kind == "foresight"), None)

    def cost_ratio(self, judged: Judged) -> float | None:
        """`judged`'s GPU-hours over foresight's, at the capacity estimate (`None` without foresight)."""
        bound = self.foresight
        if bound is None or bound.point.gpu_hours <= 0:
            return None
        return judged.point.gpu_hours / bound.point.gpu_hours

    def cheapest_meeting(self) -> Judged | None:
        """The cheapest deployable policy whose attainment at the estimate meets the target, whatever
        its verdict: the answer when nothing is supported or only standing headroom meets the SLO."""
        target = self.rules.slo_attainment
        return min(
            (j for j in self.judged if j.policy.candidate and j.point.slo_attainment >= target),
            key=lambda j: (j.point.gpu_hours, j.point.scale_events),
            default=None,
        )

    def headroom_only(self) -> bool:
        """Only standing headroom meets the target: the reactive bound (the present rate known at once,
        no lag) misses it, and so does every policy that anticipates (the arrival-rate forecast): the
        traffic rises faster than a sync period plus a cold start, and nothing before announces it."""
        target = self.rules.slo_attainment
        bound = next((j for j in self.judged if j.policy.kind == "reactive"), None)
        anticipating = [j for j in self.judged if j.policy.kind == "hpa" and j.policy.forecast is not None]
        return (
            bound is not None
            and bound.point.slo_attainment < target
            and all(j.point.slo_attainment < target for j in anticipating)
        )


def frontier(judged: tuple[Judged, ...]) -> list[Judged]:
    """Policies not dominated (cheaper or equal cost and better or equal attainment, one strictly)."""

    def dominated(a: Judged) -> bool:
        return any(
            b.point.gpu_hours <= a.point.gpu_hours
            and b.point.slo_attainment >= a.point.slo_attainment
            and (b.point.gpu_hours < a.point.gpu_hours or b.point.slo_attainment > a.point.slo_attainment)
            for b in judged
        )

    return sorted((a for a in judged if not dominated(a)), key=lambda j: j.point.gpu_hours)


def _pct(value: float) -> str:
    return f"{value * 100:.1f} %"


def _miss(point: Scorecard, target: float) -> str:
    """Which objective failed: `TTFT SLO 91.2 % < 99 %`."""
    if point.ttft_attainment < target:
        return f"TTFT SLO {_pct(point.ttft_attainment)} < {_pct(target)}"
    if point.tpot_attainment < target:
        return f"TPOT SLO {_pct(point.tpot_attainment)} < {_pct(target)}"
    return f"SLO attainment {_pct(point.slo_attainment)} < {_pct(target)}"


def _first_pass(
    policy: Policy,
    outcomes: tuple[Scorecard, Scorecard, Scorecard],
    capacity: Estimate,
    rules: Rules,
    window: str | None,
    band: Band | None = None,
) -> tuple[Verdict, str]:
    point, low, high = outcomes
    if not policy.candidate:
        knows = "the traffic ahead" if policy.kind == "foresight" else "the present rate at once, with no lag"
        return (
            "reference",
            f"a bound, not deployable: it knows {knows}; "
            f"{point.gpu_hours:.3g} GPU-h at {_pct(point.slo_attainment)}",
        )
    if window:
        return "open", window
    target = rules.slo_attainment
    if band is not None and band.slo.low < target <= band.slo.high:
        return "open", (
            f"SLO attainment {_pct(band.slo.high)} on the luckiest of {band.seeds} seeds but "
            f"{_pct(band.slo.low)} on the worst: the samples the HPA reads decide"
        )
    if high.slo_attainment < target and (band is None or band.slo.high < target):
        even = (
            ""
            if capacity.high == capacity.value
            else f" ({_pct(high.slo_attainment)} even at {capacity.high:.3g} req/s per replica)"
        )
        return "rejected", _miss(point, target) + even
    if low.slo_attainment >= target and (band is None or band.slo.low >= target):
        down = "" if capacity.low == capacity.value else f" down to {capacity.low:.3g} req/s per replica"
        seeds = "" if band is None else f" and on all {band.seeds} seeds (worst {_pct(band.slo.low)})"
        worst = min(low.slo_attainment, band.slo.low) if band is not None else low.slo_attainment
        return (
            "supported",
            f"SLO attainment {_pct(worst)} >= {_pct(target)}{down}{seeds}; {point.gpu_hours:.3g} GPU-h",
        )
    return "open", (
        f"SLO attainment {_pct(high.slo_attainment)} at {capacity.high:.3g} req/s per replica but "
        f"{_pct(low.slo_attainment)} at {capacity.low:.3g}: the capacity's uncertainty decides"
    )


def decide(
    policies: list[Policy],
    outcomes: list[tuple[Scorecard, Scorecard, Scorecard]],
    capacity: Estimate,
    rules: Rules,
    *,
    requests: float,
    gap_share: float,
    bands: list[Band | None] | None = None,
) -> Decision:
    """Judge every policy from its (estimate, pessimistic, optimistic) outcomes and its band."""
    window = None
    if requests < rules.min_requests:
        window = f"fewer than {rules.min_requests} requests in the window ({requests:.0f})"
    elif gap_share > rules.max_gap_share:
        window = f"gaps cover {_pct(gap_share)} of the range (more than {_pct(rules.max_gap_share)})"
    spreads = bands if bands is not None else [None] * len(policies)
    first = [
        _first_pass(p, o, capacity, rules, window, b)
        for p, o, b in zip(policies, outcomes, spreads, strict=True)
    ]
    supported = [o[0] for (verdict, _), o in zip(first, outcomes, strict=True) if verdict == "supported"]
    cheapest = min(supported, key=lambda o: o.gpu_hours, default=None)
    judged = []
    for policy, (verdict, reason), (point, low, high), band in zip(
        policies, first, outcomes, spreads, strict=True
    ):
        if (
            verdict == "supported"
            and cheapest is not None
            and point.gpu_hours > rules.max_cost_ratio * cheapest.gpu_hours
        ):
            ratio = point.gpu_hours / cheapest.gpu_hours
            verdict, reason = (
                "rejected",
                (
                    f"meets the SLO but costs {ratio:.2g}x the GPU-hours of {cheapest.name} "
                    f"({point.gpu_hours:.3g} vs {cheapest.gpu_hours:.3g}; limit {rules.max_cost_ratio:g}x)"
                ),
            )
        judged.append(Judged(policy, verdict, reason, point, low, high, band))
    best = min(
        (j for j in judged if j.verdict == "supported"),
        key=lambda j: (j.point.gpu_hours, j.point.scale_events),
        default=None,
    )
    return Decision(tuple(judged), best, rules)
