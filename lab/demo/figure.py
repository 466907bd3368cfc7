"""The demo's picture: four stacked panels over the run's ticks, drawn with matplotlib into a PNG.

The only module of the demo that imports matplotlib (the `lab` extra).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

# The demo runs headless (CI, SSH); Agg renders PNGs without any display.
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from lab.demo.records import Tick


def plot(path: Path, ticks: Sequence[Tick], *, title: str, target: float | None = None) -> None:
    """Draw `figure` into a PNG file."""
    drawn = figure(ticks, title=title, target=target)
    drawn.savefig(path, dpi=100)
    plt.close(drawn)


def figure(ticks: Sequence[Tick], *, title: str, target: float | None = None) -> Figure:
    """Four stacked panels sharing the time axis: load, queue, KV/TPOT, replicas (with the HPA's metric).

    Unknown values are NaN, which matplotlib draws as a break in the line rather than a drop to zero.
    """
    t = [s.t for s in ticks]
    drawn, axes = plt.subplots(4, 1, figsize=(11, 10), sharex=True)
    load, queue, cache, replicas = axes
    load.plot(t, [s.offered_rps for s in ticks], label="offered req/s", color="tab:gray", linestyle="--")
    load.plot(t, [s.sent_rps for s in ticks], label="sent req/s", color="tab:blue", alpha=0.6)
    load.plot(t, [s.completed_rps for s in ticks], label="completed req/s", color="tab:green")
    queue.plot(t, [_gap(s.waiting) for s in ticks], label="waiting", color="tab:red")
    queue.plot(t, [_gap(s.running) for s in ticks], label="running", color="tab:blue")
    cache.plot(t, [_gap(s.kv_usage) for s in ticks], label="KV cache usage", color="tab:purple")
    cache.set_ylim(0, 1.05)
    tpot = cache.twinx()
    tpot.plot(t, [_gap(s.tpot_p90) * 1000 for s in ticks], label="TPOT p90 (ms)", color="tab:orange")
    tpot.set_ylabel("ms")
    replicas.step(t, [s.desired for s in ticks], where="post", label="desired", color="tab:blue")
    replicas.step(t, [s.ready for s in ticks], where="post", label="ready", color="tab:green")
    replicas.step(t, [s.replicas for s in ticks], where="post", label="existing", color="tab:gray", alpha=0.5)
    if target:
        per_replica = replicas.twinx()
        per_replica.plot(
            t,
            [_gap(s.metric) / max(s.replicas, 1) for s in ticks],
            color="tab:red",
            alpha=0.4,
            label="metric per replica",
        )
        per_replica.axhline(target, color="tab:red", linestyle=":", label=f"target {target:g}")
        per_replica.legend(loc="upper right", fontsize="small")
    _shade_stages(axes, ticks)
    for axis, label in zip(axes, ("req/s", "requests", "fraction", "replicas"), strict=True):
        axis.set_ylabel(label)
        axis.legend(loc="upper left", fontsize="small")
        axis.grid(alpha=0.3)
    tpot.legend(loc="upper right", fontsize="small")
    replicas.set_xlabel("emulated seconds")
    drawn.suptitle(title)
    drawn.tight_layout()
    return drawn


def _gap(value: float | None) -> float:
    return math.nan if value is None else value


def _shade_stages(axes: Sequence[Any], ticks: Sequence[Tick]) -> None:
    """Alternate light bands per profile stage, labelled on the top panel."""
    spans: list[tuple[str, float, float]] = []
    for tick in ticks:
        if spans and spans[-1][0] == tick.stage:
            spans[-1] = (tick.stage, spans[-1][1], tick.t)
        else:
            spans.append((tick.stage, tick.t, tick.t))
    for index, (name, begin, end) in enumerate(spans):
        for axis in axes:
            if index % 2:
                axis.axvspan(begin, end, color="0.92", zorder=0)
        axes[0].text(
            (begin + end) / 2, 1.0, name, transform=axes[0].get_xaxis_transform(), ha="center", va="bottom"
        )
