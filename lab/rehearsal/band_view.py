"""The rehearsal against its band over time: replicas and TTFT p90, live and on the seeds.

The outcome band (`lab.backtest.band.Band`) says whether a day's SLO attainment and replica-minutes
fall within what the backtest predicts; this picture says where a run and its prediction part. Time is
cut into `BIN_SECONDS` bins (a sync period): for each bin, the replicas that existed (the mean over the
bin) and the TTFT p90 of the requests sent in it, live (the rehearsal's ticks and requests) and for
every seed (its `Timeline`), the seeds drawn as their median and the 5th-95th percentile of the seeds
at that bin (pointwise, so a band of shapes, not one seed's path). Writes `band.png` with matplotlib
(the lab extra).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lab.backtest.outcome import ttft_percentile
from lab.records import RequestRecord, Tick
from lab.rehearsal.prediction import BandPrediction
from lab.stats import percentile

#: Seconds per bin of the picture: one HPA sync period.
BIN_SECONDS: Final = 15.0
PNG_NAME: Final = "band.png"


@dataclass(frozen=True)
class Lane:
    """One quantity over the bins: live, and the seeds' median and 5th-95th percentiles."""

    live: list[float | None]
    median: list[float | None]
    low: list[float | None]
    high: list[float | None]


@dataclass(frozen=True)
class BandSeries:
    """Both quantities over the run's bins."""

    starts: list[float]
    replicas: Lane
    ttft_p90: Lane


def _lane(live: list[float | None], seeds: list[list[float | None]]) -> Lane:
    median: list[float | None] = []
    low: list[float | None] = []
    high: list[float | None] = []
    for index in range(len(live)):
        known = [v for s in seeds if (v := s[index]) is not None]
        median.append(statistics.median(known) if known else None)
        low.append(percentile(known, 0.05) if known else None)
        high.append(percentile(known, 0.95) if known else None)
    return Lane(live, median, low, high)


def series(
    prediction: BandPrediction, ticks: Sequence[Tick], requests: Sequence[RequestRecord]
) -> BandSeries:
    """The live run and its band, bin by bin, up to the run's last tick."""
    until = ticks[-1].t if ticks else 0.0
    bins = max(1, math.ceil(until / BIN_SECONDS))
    starts = [i * BIN_SECONDS for i in range(bins)]

    def bin_of(t: float) -> int | None:
        index = int(t // BIN_SECONDS)
        return index if 0 <= index < bins else None

    live_pods: list[list[float]] = [[] for _ in range(bins)]
    for tick in ticks:
        b = bin_of(tick.t)
        if b is not None:
            live_pods[b].append(float(tick.replicas))
    live_ttfts: list[list[float]] = [[] for _ in range(bins)]
    for request in requests:
        b = bin_of(request.sent)
        if b is not None and request.ttft is not None:
            live_ttfts[b].append(request.ttft)
    seed_pods: list[list[float | None]] = []
    seed_ttfts: list[list[float | None]] = []
    for line in prediction.timelines:
        pods: list[list[int]] = [[] for _ in range(bins)]
        waits: list[dict[int, float]] = [{} for _ in range(bins)]
        for k, count in enumerate(line.pods):
            b = bin_of(k * line.dt)
            if b is None:
                continue
            pods[b].append(count)
            for wait, amount in line.served_at[k].items():
                waits[b][wait] = waits[b].get(wait, 0.0) + amount
        seed_pods.append([statistics.fmean(p) if p else None for p in pods])
        seed_ttfts.append([ttft_percentile(w, 0.9) for w in waits])
    return BandSeries(
        starts,
        _lane([statistics.fmean(p) if p else None for p in live_pods], seed_pods),
        _lane([percentile(t, 0.9) if t else None for t in live_ttfts], seed_ttfts),
    )


def plot(path: Path, view: BandSeries, *, title: str, slo_ttft: float) -> None:
    """Write the two-panel PNG: replicas, then TTFT p90 (log scale) with the SLO's line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7), dpi=100, sharex=True)
    x = [s / 60 for s in view.starts]
    for axes, lane, unit in ((top, view.replicas, "replicas"), (bottom, view.ttft_p90, "TTFT p90 (s)")):
        low = [math.nan if v is None else v for v in lane.low]
        high = [math.nan if v is None else v for v in lane.high]
        median = [math.nan if v is None else v for v in lane.median]
        live = [math.nan if v is None else v for v in lane.live]
        band = "backtest: 5th-95th percentile of the seeds"
        axes.fill_between(x, low, high, step="post", color="#9ecae1", alpha=0.6, label=band)
        axes.step(x, median, where="post", color="#3182bd", linestyle="--", label="backtest: median seed")
        axes.step(x, live, where="post", color="#d94801", linewidth=1.8, label="live")
        axes.set_ylabel(unit)
        axes.grid(True, alpha=0.3)
    bottom.axhline(slo_ttft, color="#888888", linestyle=":", linewidth=1, label=f"TTFT SLO {slo_ttft:g} s")
    bottom.set_yscale("log")
    bottom.set_xlabel(f"minutes into the run ({BIN_SECONDS:g} s bins; TTFT by the time a request was sent)")
    top.legend(loc="upper left", fontsize=8, frameon=False)
    bottom.legend(loc="upper left", fontsize=8, frameon=False)
    top.set_title(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
