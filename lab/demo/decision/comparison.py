"""The run beside the same day backtested: foresight, a utilisation HPA, a fixed peak fleet.

What the product is for, on the demo's first screen: the policy that keeps the SLO for the least GPU
time, against the least any policy could spend (foresight, which knows the traffic ahead) and what
the usual choices would have cost. The figures are the backtest's fleet model on the run's own day
(`lab.demo.decision.choice`); the run's own line is what the live loop measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.backtest.decision import Judged


@dataclass(frozen=True)
class Row:
    """One policy on the day, as the backtest played it."""

    label: str
    name: str
    """The backtest's name of the policy (`foresight`, `gpu-util-80`, ...)."""
    description: str
    slo_attainment: float
    replica_minutes: float


def row(label: str, judged: Judged, note: str | None = None) -> Row:
    """`judged`'s outcome at the capacity estimate; `note` replaces the policy's own description."""
    policy = judged.policy
    return Row(
        label,
        policy.name,
        note or policy.describe(),
        judged.point.slo_attainment,
        judged.point.replica_minutes,
    )


@dataclass(frozen=True)
class Comparison:
    """The rows the summary prints under the run's own figures."""

    foresight: Row
    baselines: tuple[Row, ...]
    """The utilisation HPA and the fixed peak fleet."""
    recommended: Row | None
    """The decision's recommendation (`None` when nothing was supported)."""

    def multiple(self, replica_minutes: float) -> float:
        """`replica_minutes` over foresight's."""
        return (
            replica_minutes / self.foresight.replica_minutes
            if self.foresight.replica_minutes
            else float("nan")
        )

    def lines(self, slo_attainment: float, replica_minutes: float) -> list[str]:
        """The table: this run, then the recommendation, foresight and the baselines on the same day."""
        chosen = "none supported" if self.recommended is None else self.recommended.name

        def line(label: str, attainment: float, minutes: float, note: str) -> str:
            return (
                f"  {label:<20}{attainment:>7.1%}  {minutes:>6.1f} replica-minutes  "
                f"{self.multiple(minutes):>5.2f}x foresight  {note}".rstrip()
            )

        rows = [line("this run", slo_attainment, replica_minutes, "measured live")]
        for r in (self.recommended, self.foresight, *self.baselines):
            if r is not None:
                rows.append(line(r.label, r.slo_attainment, r.replica_minutes, r.description))
        return [f"same day, backtested (recommended: {chosen}):", *rows]
