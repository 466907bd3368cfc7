"""The profile's picture: the capacity curves against offered rate, with the knee and the SLO marked.

The only module of the profile that imports matplotlib (the `lab` extra).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

# Profiles run headless (CI, a pod, SSH); Agg renders PNGs without any display.
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lab.profile.knee import linear_fit, rate_steps
from lab.profile.schema import Profile
from lab.profile.steps import percentile_key


def plot(path: Path, profile: Profile, *, title: str) -> None:
    """Draw `figure` into a PNG file."""
    drawn = figure(profile, title=title)
    drawn.savefig(path, dpi=100)
    plt.close(drawn)


def _ms(values: list[float]) -> list[float]:
    return [v * 1000 if math.isfinite(v) else math.nan for v in values]


def figure(profile: Profile, *, title: str) -> Figure:
    """Four panels: throughput, latency (with the SLO), the server's queue and KV cache against
    offered rate, and TPOT against batch size. The knee is a vertical line on the first three."""
    steps = rate_steps(profile.steps)
    key = percentile_key(profile.slo.percentile)
    rates = [s.offered_rate for s in steps]
    drawn, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    (throughput, latency), (server, batch) = axes
    throughput.plot(rates, [s.achieved_rate for s in steps], "o-", color="tab:green", label="completed")
    top = max([*rates, profile.saturated_rate or 0.0, 1e-9])
    throughput.plot([0, top], [0, top], ":", color="0.5", label="offered")
    if profile.saturated_rate:
        throughput.axhline(
            profile.saturated_rate, color="tab:gray", linestyle="--", label="saturated (closed loop)"
        )
    for step in steps:
        if not step.queue_stable:
            throughput.plot(step.offered_rate, step.achieved_rate, "x", color="tab:red", markersize=10)
    throughput.set(xlabel="offered req/s", ylabel="completed req/s", title="throughput (x: queue grows)")

    latency.plot(
        rates,
        _ms([s.ttft_seconds.get(key, math.nan) for s in steps]),
        "o-",
        color="tab:blue",
        label=f"TTFT {key}",
    )
    latency.plot(
        rates,
        _ms([s.tpot_seconds.get(key, math.nan) for s in steps]),
        "o-",
        color="tab:orange",
        label=f"TPOT {key}",
    )
    latency.axhline(profile.slo.ttft_seconds * 1000, color="tab:blue", linestyle=":", label="TTFT SLO")
    latency.axhline(profile.slo.tpot_seconds * 1000, color="tab:orange", linestyle=":", label="TPOT SLO")
    latency.set_yscale("log")
    latency.set(xlabel="offered req/s", ylabel="ms (log)", title=f"client latency, {key}")

    server.plot(rates, [s.running for s in steps], "o-", color="tab:blue", label="running")
    server.plot(rates, [s.waiting for s in steps], "o-", color="tab:red", label="waiting")
    if profile.server.max_num_seqs:
        server.axhline(profile.server.max_num_seqs, color="tab:blue", linestyle=":", label="max_num_seqs")
    server.set(xlabel="offered req/s", ylabel="requests", title="the server: batch, queue, KV cache")
    kv = server.twinx()
    kv.plot(rates, [s.kv_usage for s in steps], "s--", color="tab:purple", label="KV usage")
    kv.set_ylim(0, 1.05)
    kv.set_ylabel("KV usage")
    kv.legend(loc="center right", fontsize="small")

    points = profile.tpot_vs_batch
    batch.plot(
        [b for b, _t in points], [t * 1000 for _b, t in points], "o", color="tab:orange", label="steps"
    )
    fit = linear_fit(points)
    if fit is not None and points:
        xs = [0.0, max(b for b, _t in points)]
        batch.plot(xs, [(fit[0] + fit[1] * x) * 1000 for x in xs], "-", color="0.4",
                   label=f"{fit[0] * 1000:.1f} + {fit[1] * 1000:.2f}·batch ms")  # fmt: skip
    batch.set(xlabel="running requests (batch)", ylabel="mean TPOT ms", title="TPOT against batch size")

    if profile.knee is not None:
        for axis in (throughput, latency, server):
            axis.axvline(
                profile.knee.rate,
                color="tab:red",
                linewidth=2,
                alpha=0.6,
                label=f"knee {profile.knee.rate:.3g} req/s",
            )
    for axis in (throughput, latency, server, batch):
        _finish(axis)
    drawn.suptitle(title)
    drawn.tight_layout()
    return drawn


def _finish(axis: Axes) -> None:
    axis.grid(alpha=0.3)
    axis.legend(loc="upper left", fontsize="small")
