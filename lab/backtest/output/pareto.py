"""The Pareto picture: SLO attainment against GPU-hours, one point per policy, coloured by verdict.

The frontier joins the policies no other beats on both axes; each point is a policy's median over the
seeds, its bars span the seeds' range (and the attainment at the capacity band's ends, where wider). The only
module of the backtest that imports matplotlib (the `lab` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import matplotlib

# Headless (CI, SSH): Agg renders PNGs without any display.
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from lab.backtest.decision import Decision, Judged, frontier

COLOURS: Final = {"supported": "#2a9d3f", "rejected": "#c0392b", "open": "#e1a100", "reference": "#555555"}


def _label(axes: Axes, judged: tuple[Judged, ...]) -> None:
    """One label per point: policies with the same outcome share it, one name a line."""
    groups: dict[tuple[float, float], list[str]] = {}
    for j in judged:
        key = (round(j.point.gpu_hours, 4), round(j.point.slo_attainment * 100, 2))
        groups.setdefault(key, []).append(j.policy.name)
    # Neighbours alternate below and above their points, so close groups do not write over each other.
    for index, ((x, y), names) in enumerate(sorted(groups.items())):
        below = index % 2 == 0
        axes.annotate(
            "\n".join(names),
            (x, y),
            textcoords="offset points",
            xytext=(7, -4 if below else 5),
            fontsize=7.5,
            va="top" if below else "bottom",
            linespacing=1.1,
        )


def _worst(j: Judged) -> float:
    band = j.band
    return min(j.pessimistic.slo_attainment, band.slo.low if band else 1.0)


def _best(j: Judged) -> float:
    band = j.band
    return max(j.optimistic.slo_attainment, band.slo.high if band else 0.0)


def _hours(j: Judged, *, low: bool) -> float:
    """GPU-hours at one end of the seeds' range (replica-minutes scaled as the point's)."""
    band = j.band
    if band is None or j.point.replica_minutes <= 0:
        return j.point.gpu_hours
    end = band.replica_minutes.low if low else band.replica_minutes.high
    return j.point.gpu_hours * end / j.point.replica_minutes


def plot(path: Path, decision: Decision, *, title: str) -> None:
    """Write the PNG."""
    figure, axes = plt.subplots(figsize=(12, 6.5), dpi=100)
    target = decision.rules.slo_attainment * 100
    axes.axhline(target, color="#888888", linestyle="--", linewidth=1)
    axes.annotate(
        f"SLO target {target:g} %",
        (0.995, target),
        xycoords=("axes fraction", "data"),
        ha="right",
        va="bottom",
        fontsize=8,
        color="#555555",
    )
    edge = frontier(decision.judged)
    axes.plot(
        [j.point.gpu_hours for j in edge],
        [j.point.slo_attainment * 100 for j in edge],
        color="#999999",
        linewidth=1,
        zorder=1,
        label="Pareto frontier",
    )
    for verdict, colour in COLOURS.items():
        chosen = [j for j in decision.judged if j.verdict == verdict]
        if not chosen:
            continue
        xs = [j.point.gpu_hours for j in chosen]
        ys = [j.point.slo_attainment * 100 for j in chosen]
        low = [max(0.0, y - _worst(j) * 100) for j, y in zip(chosen, ys, strict=True)]
        high = [max(0.0, _best(j) * 100 - y) for j, y in zip(chosen, ys, strict=True)]
        left = [max(0.0, x - _hours(j, low=True)) for j, x in zip(chosen, xs, strict=True)]
        right = [max(0.0, _hours(j, low=False) - x) for j, x in zip(chosen, xs, strict=True)]
        axes.errorbar(
            xs,
            ys,
            yerr=[low, high],
            xerr=[left, right],
            fmt="o",
            color=colour,
            ecolor=colour,
            elinewidth=1,
            capsize=3,
            markersize=7,
            label=verdict,
            zorder=3,
        )
    _label(axes, decision.judged)
    best = decision.recommended
    if best is not None:
        axes.scatter(
            [best.point.gpu_hours],
            [best.point.slo_attainment * 100],
            s=260,
            facecolors="none",
            edgecolors="#2a9d3f",
            linewidths=2,
            zorder=4,
            label=f"recommended: {best.policy.name}",
        )
    axes.set_xlabel("GPU-replica-hours over the window (median over the seeds; bars: the seeds' range)")
    axes.set_ylabel("SLO attainment (% of requests meeting TTFT and TPOT)")
    axes.set_title(title, fontsize=11)
    axes.margins(x=0.12, y=0.08)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
