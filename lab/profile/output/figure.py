"""The profile's picture: the capacity curves against offered rate, with the knee and the SLO marked.

Steps that held the SLO with a stable queue make the curves; the others are red crosses at their
rate, so the picture shows where the replica stops keeping up. The closed-loop steps of the sweep
are hollow circles at the rate they completed: they fill in the light load the rate steps skip. The
only module of the profile that imports matplotlib (the `lab` extra).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

# Profiles run headless (CI, a pod, SSH); Agg renders PNGs without any display.
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lab.profile.knee import held, rate_verdicts
from lab.profile.schema import Profile, Step
from lab.profile.steps import percentile_key
from lab.stats import linear_fit

_FAILED = {"marker": "x", "linestyle": "none", "color": "tab:red", "markersize": 9}


def plot(path: Path, profile: Profile, *, title: str) -> None:
    """Draw `figure` into a PNG file."""
    drawn = figure(profile, title=title)
    drawn.savefig(path, dpi=100)
    plt.close(drawn)


def _ms(value: float) -> float:
    return value * 1000 if math.isfinite(value) else math.nan


def _curve(
    axis: Axes,
    steps: Sequence[Step],
    value: Callable[[Step], float],
    style: str,
    color: str,
    label: str,
    closed: Sequence[Step] = (),
) -> None:
    """The held steps as a line, the failed ones as crosses, closed-loop steps as hollow circles."""
    good = [s for s in steps if held(s)]
    axis.plot([s.offered_rate for s in good], [value(s) for s in good], style, color=color, label=label)
    bad = [s for s in steps if not held(s)]
    axis.plot([s.offered_rate for s in bad], [value(s) for s in bad], **_FAILED)  # type: ignore[arg-type]
    axis.plot(
        [s.achieved_rate for s in closed],
        [value(s) for s in closed],
        "o",
        color=color,
        markerfacecolor="none",
        alpha=0.6,
    )


def figure(profile: Profile, *, title: str) -> Figure:
    """Four panels: throughput, latency (with the SLO), the server's queue and KV cache against
    offered rate, and TPOT against batch size. The knee is a vertical line on the first three."""
    steps = rate_verdicts(profile.steps)  # one point per rate: the measurement that decided it
    closed = [s for s in profile.steps if s.kind == "concurrency"]
    key = percentile_key(profile.slo.percentile)
    drawn, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    (throughput, latency), (server, batch) = axes
    top = max([*(s.offered_rate for s in steps), profile.saturated_rate or 0.0, 1e-9])
    throughput.plot([0, top], [0, top], ":", color="0.5", label="completed = offered")
    _curve(throughput, steps, lambda s: s.achieved_rate, "o-", "tab:green", "completed")
    if profile.saturated_rate:
        throughput.axhline(
            profile.saturated_rate, color="tab:gray", linestyle="--", label="saturated (closed loop)"
        )
    throughput.plot([], [], label="SLO broken or queue growing", **_FAILED)
    throughput.set(xlabel="offered req/s", ylabel="completed req/s", title="throughput")

    def ttft(step: Step) -> float:
        return _ms(step.ttft_seconds.get(key, math.nan))

    def tpot(step: Step) -> float:
        return _ms(step.tpot_seconds.get(key, math.nan))

    _curve(latency, steps, ttft, "o-", "tab:blue", f"TTFT {key}", closed)
    _curve(latency, steps, tpot, "o-", "tab:orange", f"TPOT {key}", closed)
    latency.plot([], [], "o", color="0.4", markerfacecolor="none", label="closed-loop steps")
    latency.axhline(profile.slo.ttft_seconds * 1000, color="tab:blue", linestyle=":", label="TTFT SLO")
    latency.axhline(profile.slo.tpot_seconds * 1000, color="tab:orange", linestyle=":", label="TPOT SLO")
    latency.set_yscale("log")
    latency.set(xlabel="offered req/s", ylabel="ms (log)", title=f"client latency, {key}")

    _curve(server, steps, lambda s: s.running, "o-", "tab:blue", "running", closed)
    _curve(server, steps, lambda s: s.waiting, "o-", "tab:red", "waiting", closed)
    if profile.server.max_num_seqs:
        server.axhline(profile.server.max_num_seqs, color="tab:blue", linestyle=":", label="max_num_seqs")
    server.set(xlabel="offered req/s", ylabel="requests", title="the server: batch, queue, KV cache")
    kv = server.twinx()
    _curve(kv, steps, lambda s: s.kv_usage, "s--", "tab:purple", "KV usage", closed)
    kv.set_ylim(0, 1.05)
    kv.set_ylabel("KV usage")
    kv.legend(loc="center right", fontsize="small")

    points = profile.tpot_vs_batch
    batch.plot(
        [b for b, _t in points],
        [t * 1000 for _b, t in points],
        "o",
        color="tab:orange",
        label="closed-loop steps",
    )
    fit = linear_fit(points)
    if fit is not None and points:
        xs = [0.0, max(b for b, _t in points)]
        batch.plot(
            xs,
            [(fit[0] + fit[1] * x) * 1000 for x in xs],
            "-",
            color="0.4",
            label=f"{fit[0] * 1000:.1f} + {fit[1] * 1000:.2f}·batch ms",
        )
    batch.set(xlabel="running requests (batch)", ylabel="mean TPOT ms", title="TPOT against batch size")

    for axis in (throughput, latency, server):
        axis.set_xlim(left=0)
        if profile.knee is not None:
            axis.axvline(
                profile.knee.rate,
                color="tab:red",
                linewidth=2,
                alpha=0.6,
                label=f"knee {profile.knee.rate:.3g} req/s",
            )
    for axis in (throughput, latency, server, batch):
        axis.grid(alpha=0.3)
        axis.legend(loc="upper left", fontsize="small")
    drawn.suptitle(title)
    drawn.tight_layout()
    return drawn
