"""The experiment's picture: each variant's knee band and seeds against the baseline's band.

One row a variant, knee per GPU along the x axis: the union of its seeds' bands as a bar, each
seed's knee (the highest rate that held) as a dot, the saturated throughput as a diamond. The
baseline's band is shaded across every row, so a bar clear of the shade is a difference beyond the
spread and one that overlaps it is not. The only module of the experiments that imports matplotlib.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

import matplotlib

# Records are written headless (CI, a GPU host over SSH); Agg renders PNGs without any display.
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from lab.experiments.catalog import Catalog
from lab.experiments.gates import Row, spread_of
from lab.experiments.runner import Outcome

_COLORS: Final = {
    "supported": "tab:green",
    "rejected": "tab:red",
    "open": "tab:gray",
    "caveated": "tab:orange",
    "blocked": "black",
    "reference": "tab:blue",
}


def plot(path: Path, catalog: Catalog, outcomes: dict[str, Outcome], rows: Sequence[Row]) -> None:
    """Draw `figure` into a PNG file."""
    drawn = figure(catalog, outcomes, rows)
    drawn.savefig(path, dpi=100)
    plt.close(drawn)


def figure(catalog: Catalog, outcomes: dict[str, Outcome], rows: Sequence[Row]) -> Figure:
    names = [catalog.baseline, *(v.name for v in catalog.variants if v.name != catalog.baseline)]
    verdicts = {r.variant: r.verdict for r in rows if r.question == "capacity"}
    gpus = catalog.engine.gpus
    fig, axis = plt.subplots(figsize=(9, 1.2 + 0.6 * len(names)))
    base = (
        spread_of(outcomes[catalog.baseline].repeats, lambda r: r.knee, gpus)
        if catalog.baseline in outcomes
        else None
    )
    if base is not None:
        axis.axvspan(
            base.low, base.high, color=_COLORS["reference"], alpha=0.15, label="baseline's knee band"
        )
    for y, name in enumerate(names):
        outcome = outcomes.get(name)
        verdict = verdicts.get(name, "open")
        color = _COLORS.get(verdict, "tab:gray")
        knee = spread_of(outcome.repeats, lambda r: r.knee, gpus) if outcome else None
        if knee is None:
            axis.text(
                0.01,
                y,
                f"{verdict}: no knee measured",
                transform=axis.get_yaxis_transform(),
                va="center",
                color=color,
            )
            continue
        axis.plot([knee.low, knee.high], [y, y], linewidth=8, alpha=0.45, color=color, solid_capstyle="butt")
        seeds = [r.knee.held / gpus for r in outcome.repeats if r.knee is not None] if outcome else []
        axis.plot(seeds, [y] * len(seeds), "o", color=color)
        saturated = (
            [r.saturated / gpus for r in outcome.repeats if r.saturated is not None] if outcome else []
        )
        axis.plot(saturated, [y] * len(saturated), "D", color=color, markerfacecolor="none")
    axis.set_yticks(range(len(names)), [f"{n} ({verdicts.get(n, 'open')})" for n in names])
    axis.invert_yaxis()
    axis.set_xlabel(
        "requests per second per GPU (bar: the seeds' knee bands; dot: a seed's knee; ◇: saturated)"
    )
    axis.set_xlim(left=0)
    axis.set_title(f"{catalog.engine.model}: knee against the baseline ({len(catalog.seeds)} seeds each)")
    if base is not None:
        axis.legend(loc="upper left", fontsize="small")  # knees sit right of it
    fig.tight_layout()
    return fig
