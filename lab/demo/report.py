"""The demo's record of a run: one CSV row per tick, a PNG plot and a summary.

The summary answers three questions a capacity planner asks of a scaling policy: how many requests
met the latency SLO, what the fleet cost (replica-minutes, counting replicas that are still loading,
since a loading GPU is paid for), and how long the queue got.

A value nobody can know at a tick (the queue while no replica is Ready, a p90 without requests) is
`None`: an empty CSV cell, a break in the plotted line, and left out of the summary, never a zero.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import matplotlib

# The demo runs headless (CI, SSH); Agg renders PNGs without any display.
matplotlib.use("Agg")
import itertools

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

CSV_NAME: Final = "demo.csv"
PNG_NAME: Final = "demo.png"
SUMMARY_NAME: Final = "summary.json"
SUMMARY_TEXT_NAME: Final = "summary.txt"


@dataclass(frozen=True)
class Tick:
    """The fleet at one tick of the run (emulated time)."""

    t: float
    """Seconds since the load started."""
    stage: str
    offered_rps: float
    """What the profile asks for at `t` (requests per second)."""
    sent_rps: float
    """Requests actually sent since the previous tick, per second (Poisson noise around `offered_rps`)."""
    completed_rps: float
    waiting: int | None
    """Σ `vllm:num_requests_waiting` over serving replicas; `None` while none is Ready (nothing reports it)."""
    running: int | None
    """Σ `vllm:num_requests_running` over serving replicas; `None` while none is Ready."""
    kv_usage: float | None
    """Mean `vllm:kv_cache_usage_perc` over serving replicas (0-1); `None` while none is Ready."""
    tpot_p90: float | None
    """p90 of per-request TPOT (seconds) over requests finished in the last window; `None` without any."""
    ttft_p90: float | None
    metric: float | None
    """The External metric the HPA last read (sum of items, units); `None` when the read failed."""
    desired: int
    """`spec.replicas` after the HPA's last sync."""
    ready: int
    """Replicas passing `/health`."""
    replicas: int
    """Replicas that exist, loading or serving (`status.replicas`)."""


@dataclass(frozen=True)
class RequestRecord:
    """One request's fate, in emulated seconds."""

    sent: float
    outcome: str
    """`ok`, `rejected` (no serving replica or a 503), or `aborted` (its replica went away)."""
    ttft: float | None = None
    tpot: float | None = None


@dataclass(frozen=True)
class Slo:
    """The latency objective a request must meet to count as served well."""

    ttft: float = 0.5
    """Time to first token (seconds)."""
    tpot: float = 0.05
    """Mean time per output token (seconds)."""


@dataclass(frozen=True)
class Summary:
    """What a run achieved."""

    requests: int
    completed: int
    failed: int
    slo_attainment: float
    """Share of all sent requests that completed within both SLO bounds (failures count against it)."""
    slo: Slo
    replica_minutes: float
    """∫ existing replicas dt over the run, in minutes of emulated time."""
    peak_queue: int | None
    """Most requests waiting at a tick; `None` if no tick had a Ready replica to report it."""
    no_ready_seconds: float
    """Emulated seconds without a Ready replica: requests failed and the fleet's gauges were unknown."""
    peak_replicas: int
    min_replicas_after_peak: int
    ttft_p90: float | None
    tpot_p90: float | None
    duration: float

    def text(self) -> str:
        """A few human lines, as printed at the end of the demo."""

        def ms(value: float | None) -> str:
            return "n/a" if value is None else f"{value * 1000:.0f} ms"

        queue = "n/a" if self.peak_queue is None else f"{self.peak_queue} waiting"
        outage = f"; {self.no_ready_seconds:g} s without a ready replica" if self.no_ready_seconds else ""

        return "\n".join(
            [
                f"requests        {self.requests} sent, {self.completed} completed, {self.failed} failed",
                f"SLO attainment  {self.slo_attainment:.1%} (TTFT <= {ms(self.slo.ttft)}, TPOT <= {ms(self.slo.tpot)})",
                f"latency p90     TTFT {ms(self.ttft_p90)}, TPOT {ms(self.tpot_p90)}",
                f"replicas        peak {self.peak_replicas}, {self.min_replicas_after_peak} at the end; "
                f"{self.replica_minutes:.1f} replica-minutes over {self.duration / 60:.1f} min{outage}",
                f"peak queue      {queue}",
            ]
        )


def quantile(values: Sequence[float], q: float) -> float | None:
    """The `q` quantile by linear interpolation between order statistics; `None` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(samples: Sequence[Tick], requests: Sequence[RequestRecord], slo: Slo | None = None) -> Summary:
    """Reduce a run to its `Summary`; replica-minutes hold each tick's count until the next tick."""
    slo = slo or Slo()
    done = [r for r in requests if r.outcome == "ok"]
    good = sum(
        1
        for r in done
        if r.ttft is not None and r.ttft <= slo.ttft and (r.tpot is None or r.tpot <= slo.tpot)
    )
    replica_seconds = sum(a.replicas * (b.t - a.t) for a, b in itertools.pairwise(samples))
    no_ready_seconds = sum(b.t - a.t for a, b in itertools.pairwise(samples) if a.ready == 0)
    peak_at = max(range(len(samples)), key=lambda i: samples[i].replicas, default=0)
    return Summary(
        requests=len(requests),
        completed=len(done),
        failed=len(requests) - len(done),
        slo_attainment=good / len(requests) if requests else 1.0,
        slo=slo,
        replica_minutes=replica_seconds / 60,
        peak_queue=max((s.waiting for s in samples if s.waiting is not None), default=None),
        no_ready_seconds=no_ready_seconds,
        peak_replicas=samples[peak_at].replicas if samples else 0,
        min_replicas_after_peak=min((s.replicas for s in samples[peak_at:]), default=0),
        ttft_p90=quantile([r.ttft for r in done if r.ttft is not None], 0.9),
        tpot_p90=quantile([r.tpot for r in done if r.tpot is not None], 0.9),
        duration=samples[-1].t - samples[0].t if samples else 0.0,
    )


def write_csv(path: Path, samples: Sequence[Tick]) -> None:
    """One row per sample; empty cells for missing values."""
    names = [f.name for f in dataclasses.fields(Tick)]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        for sample in samples:
            writer.writerow(["" if getattr(sample, n) is None else _cell(getattr(sample, n)) for n in names])


def _cell(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def read_csv(path: Path) -> list[Tick]:
    """The samples of a CSV written by `write_csv`."""
    types = {f.name: f.type for f in dataclasses.fields(Tick)}
    samples = []
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            values: dict[str, Any] = {}
            for name, kind in types.items():
                cell = row[name]
                if kind == "str":
                    values[name] = cell
                elif cell == "":
                    values[name] = None
                else:
                    values[name] = int(cell) if kind.startswith("int") else float(cell)
            samples.append(Tick(**values))
    return samples


def plot(path: Path, samples: Sequence[Tick], *, title: str, target: float | None = None) -> None:
    """Draw `figure` into a PNG file."""
    drawn = figure(samples, title=title, target=target)
    drawn.savefig(path, dpi=100)
    plt.close(drawn)


def figure(samples: Sequence[Tick], *, title: str, target: float | None = None) -> Figure:
    """Four stacked panels sharing the time axis: load, queue, KV/TPOT, replicas (with the HPA's metric).

    Unknown values are NaN, which matplotlib draws as a break in the line rather than a drop to zero.
    """
    t = [s.t for s in samples]
    drawn, axes = plt.subplots(4, 1, figsize=(11, 10), sharex=True)
    load, queue, cache, replicas = axes
    load.plot(t, [s.offered_rps for s in samples], label="offered req/s", color="tab:gray", linestyle="--")
    load.plot(t, [s.sent_rps for s in samples], label="sent req/s", color="tab:blue", alpha=0.6)
    load.plot(t, [s.completed_rps for s in samples], label="completed req/s", color="tab:green")
    queue.plot(t, [_gap(s.waiting) for s in samples], label="waiting", color="tab:red")
    queue.plot(t, [_gap(s.running) for s in samples], label="running", color="tab:blue")
    cache.plot(t, [_gap(s.kv_usage) for s in samples], label="KV cache usage", color="tab:purple")
    cache.set_ylim(0, 1.05)
    tpot = cache.twinx()
    tpot.plot(t, [_ms(s.tpot_p90) for s in samples], label="TPOT p90 (ms)", color="tab:orange")
    tpot.set_ylabel("ms")
    replicas.step(t, [s.desired for s in samples], where="post", label="desired", color="tab:blue")
    replicas.step(t, [s.ready for s in samples], where="post", label="ready", color="tab:green")
    replicas.step(
        t, [s.replicas for s in samples], where="post", label="existing", color="tab:gray", alpha=0.5
    )
    if target:
        per_replica = replicas.twinx()
        per_replica.plot(
            t,
            [_gap(s.metric) / max(s.replicas, 1) for s in samples],
            color="tab:red",
            alpha=0.4,
            label="metric per replica",
        )
        per_replica.axhline(target, color="tab:red", linestyle=":", label=f"target {target:g}")
        per_replica.legend(loc="upper right", fontsize="small")
    _shade_stages(axes, samples)
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


def _ms(value: float | None) -> float:
    return _gap(value) * 1000


def _shade_stages(axes: Sequence[Any], samples: Sequence[Tick]) -> None:
    """Alternate light bands per profile stage, labelled on the top panel."""
    spans: list[tuple[str, float, float]] = []
    for sample in samples:
        if spans and spans[-1][0] == sample.stage:
            spans[-1] = (sample.stage, spans[-1][1], sample.t)
        else:
            spans.append((sample.stage, sample.t, sample.t))
    for index, (name, begin, end) in enumerate(spans):
        for axis in axes:
            if index % 2:
                axis.axvspan(begin, end, color="0.92", zorder=0)
        axes[0].text(
            (begin + end) / 2, 1.0, name, transform=axes[0].get_xaxis_transform(), ha="center", va="bottom"
        )


def write_report(
    out: Path,
    samples: Sequence[Tick],
    requests: Sequence[RequestRecord],
    *,
    slo: Slo | None = None,
    title: str = "vllm-autoscale demo",
    target: float | None = None,
    settings: dict[str, Any] | None = None,
) -> Summary:
    """Write CSV, PNG and summary (JSON and text) into `out`; returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(samples, requests, slo)
    write_csv(out / CSV_NAME, samples)
    plot(out / PNG_NAME, samples, title=title, target=target)
    document = {"summary": dataclasses.asdict(summary), "settings": settings or {}}
    (out / SUMMARY_NAME).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / SUMMARY_TEXT_NAME).write_text(summary.text() + "\n", encoding="utf-8")
    return summary
