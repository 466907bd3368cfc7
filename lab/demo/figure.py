"""The demo's picture: the run's story in stacked panels over its ticks, drawn with matplotlib into a PNG.

Read top to bottom as a postmortem: the summary's verdict, then the load against the capacity of the
Ready replicas, the queue, the KV cache against its alert threshold, TTFT and TPOT against their SLO,
the replicas (desired, ready, loading), and the metric the HPA scaled on against its target. Stage
bands (grey) and cold starts (orange: some replica is loading) run through every panel; legends sit
outside the plots, where no line can cross them.

The only module of the demo that imports matplotlib (the `lab` extra).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import matplotlib

# The demo runs headless (CI, SSH); Agg renders PNGs without any display.
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from lab.demo.request_log import LATENCY_WINDOW
from lab.demo.summary import Summary, duration
from lab.records import Tick, cold_starts, per_replica, queue_series, stage_spans
from lab.slo import Slo

WIDTH_INCHES: Final = 13.0
PANEL_INCHES: Final = 1.85
HEADER_INCHES: Final = 1.1
"""The header with the title and two rows of the summary's figures; a queue run adds `ROW_INCHES` a row."""
ROW_INCHES: Final = 0.32
DPI: Final = 100

#: Where `VLLMKVCacheNearlyFull` fires by default (`alerts.params.Params.kv_cache_usage_threshold`; the
#: lab ships without the alerts package, a test holds the two equal).
KV_ALERT_THRESHOLD: Final = 0.85
#: Where the DLQ depth alert pages by default (`Params.dlq_depth_threshold`).
DLQ_ALERT_THRESHOLD: Final = 10.0

_COLD: Final = "tab:orange"
_BREACH: Final = "tab:red"


@dataclass(frozen=True)
class FigureContext:
    """What the picture needs to know about the run beyond its ticks."""

    title: str = "vllm-autoscale demo"
    slo: Slo = field(default_factory=Slo)
    summary: Summary | None = None
    """Printed at the top; `None` leaves the header empty."""
    capacity: float | None = None
    """Requests/s one Ready replica serves: the load panel draws Ready replicas × this."""
    metric: str = "metric"
    target_type: str = "AverageValue"
    target: float | None = None
    tolerance: float | None = None
    """The HPA's tolerance: the band around the target inside which it does not rescale."""
    max_replicas: int | None = None
    kv_threshold: float = KV_ALERT_THRESHOLD
    """Where `VLLMKVCacheNearlyFull` fires (mean KV usage, 0-1)."""
    dlq_threshold: float = DLQ_ALERT_THRESHOLD
    """Messages in a dead-letter queue above which the DLQ alert pages."""

    @property
    def per_replica(self) -> bool:
        """Whether the HPA compares a per-replica average with the target (AverageValue)."""
        return self.target_type == "AverageValue"


def plot(path: Path, ticks: Sequence[Tick], context: FigureContext) -> None:
    """Draw `figure` into a PNG file."""
    drawn = figure(ticks, context)
    drawn.savefig(path, dpi=DPI)
    plt.close(drawn)


def figure(ticks: Sequence[Tick], context: FigureContext | None = None) -> Figure:
    """The summary as a header over panels sharing the time axis; unknown values are NaN, which matplotlib
    draws as a break in the line rather than a drop to zero."""
    context = context or FigureContext()
    upstream = queue_series(ticks)
    painters: list[Callable[[Axes, Sequence[Tick], FigureContext], None]] = [_load, _queue]
    if upstream:
        painters.append(_upstream)
    painters += [_kv, _ttft, _tpot, _replicas, _metric]
    rows = _summary_rows(context.summary)
    header_inches = HEADER_INCHES + ROW_INCHES * max(0, len(rows) - 2)
    drawn = plt.figure(
        figsize=(WIDTH_INCHES, header_inches + PANEL_INCHES * len(painters)), layout="constrained"
    )
    grid = drawn.add_gridspec(
        len(painters) + 1, 1, height_ratios=[header_inches / PANEL_INCHES] + [1.0] * len(painters)
    )
    _header(drawn.add_subplot(grid[0]), context.title, rows, header_inches)
    axes: list[Axes] = []
    for row, paint in enumerate(painters, start=1):
        axis = drawn.add_subplot(grid[row], sharex=axes[0] if axes else None)
        paint(axis, ticks, context)
        axis.grid(alpha=0.3)
        axes.append(axis)
    _bands(axes, ticks)
    for axis in axes:
        # Outside the plot, on the right: no line can cross a legend there.
        axis.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small", frameon=False)
    for axis in axes[:-1]:
        axis.tick_params(labelbottom=False)
    axes[-1].set_xlabel("seconds since the load started (the cluster's clock: emulated)")
    if len(ticks) > 1 and ticks[-1].t > ticks[0].t:
        axes[-1].set_xlim(ticks[0].t, ticks[-1].t)
    return drawn


def _gap(value: float | None, scale: float = 1.0) -> float:
    return math.nan if value is None else value * scale


def _times(ticks: Sequence[Tick]) -> list[float]:
    return [s.t for s in ticks]


_Part = tuple[str, str, str]
"""A piece of a header row: text, colour, weight."""


def _summary_rows(summary: Summary | None) -> list[list[_Part]]:
    """The summary's figures as printed, in rows; latencies over their SLO, a DLQ and lost messages in red."""
    if summary is None:
        return []
    slo = summary.slo
    queue = "n/a" if summary.peak_queue is None else f"{summary.peak_queue} waiting"
    black, gap = "black", "     "
    rows = [
        [
            (f"SLO attainment {summary.attainment_text()}", black, "bold"),
            (
                f" of {summary.requests} requests ({summary.slo_text()}, {summary.failed} failed)",
                black,
                "normal",
            ),
            (f"{gap}TTFT p90 {duration(summary.ttft_p90)}", _over(summary.ttft_p90, slo.ttft), "bold"),
            (f"{gap}TPOT p90 {duration(summary.tpot_p90)}", _over(summary.tpot_p90, slo.tpot), "bold"),
        ],
        [
            (f"{summary.replica_minutes_text()} over {summary.duration / 60:.1f} min", black, "bold"),
            (
                f"{gap}replicas: peak {summary.peak_replicas}, {summary.min_replicas_after_peak} at the end",
                black,
                "normal",
            ),
            (f"{gap}peak queue: {queue}", black, "normal"),
        ],
    ]
    upstream = summary.upstream
    if upstream is not None:
        queue_line, cost, zero = (" ".join(line.split()) for line in upstream.lines())
        trouble = _BREACH if upstream.dlq_depth or upstream.messages_lost else black
        rows.append([(queue_line, trouble, "normal"), (f"{gap}{cost}", black, "bold")])
        rows.append([(zero, black, "normal")])
    return rows


def _header(axis: Axes, title: str, rows: Sequence[Sequence[_Part]], inches: float) -> None:
    """The title, then the summary's rows under it."""
    axis.axis("off")
    axis.text(0.0, 1.0, title, fontsize="x-large", weight="bold", va="top", transform=axis.transAxes)
    for index, row in enumerate(rows):
        _text_run(axis, 1.0 - (0.42 + ROW_INCHES * (index + 1)) / inches, row)


def _over(value: float | None, bound: float) -> str:
    return _BREACH if value is not None and value > bound else "black"


def _text_run(axis: Axes, y: float, parts: Sequence[_Part]) -> None:
    """Pieces of text side by side on one line, each in its own colour and weight."""
    previous: Any = None
    for text, color, weight in parts:
        if previous is None:
            previous = axis.text(0.0, y, text, transform=axis.transAxes)
        else:
            previous = axis.annotate(text, xy=(1, 0), xycoords=previous)
        previous.set(fontsize="large", color=color, weight=weight, va="bottom")


def _load(axis: Axes, ticks: Sequence[Tick], context: FigureContext) -> None:
    t = _times(ticks)
    axis.plot(t, [s.offered_rps for s in ticks], label="offered", color="tab:gray", linestyle="--")
    axis.plot(t, [s.sent_rps for s in ticks], label="sent", color="tab:blue", alpha=0.5)
    axis.plot(t, [s.completed_rps for s in ticks], label="completed", color="tab:green")
    if context.capacity:
        capacity = [s.ready * context.capacity for s in ticks]
        label = f"capacity: Ready × {context.capacity:.2f} req/s"
        axis.step(t, capacity, where="post", color="black", linewidth=1.2, label=label)
    axis.set_ylabel("requests/s")
    axis.set_ylim(bottom=0)


def _queue(axis: Axes, ticks: Sequence[Tick], context: FigureContext) -> None:
    t = _times(ticks)
    axis.plot(t, [_gap(s.waiting) for s in ticks], label="waiting", color=_BREACH)
    axis.plot(t, [_gap(s.running) for s in ticks], label="running", color="tab:blue")
    axis.set_ylabel("requests")
    axis.set_ylim(bottom=0)


def _upstream(axis: Axes, ticks: Sequence[Tick], context: FigureContext) -> None:
    """The upstream queue and its dead-letter queue (with the DLQ alert's threshold), when the run had one."""
    t = _times(ticks)
    colors = {"upstream queue": "tab:brown", "dead-letter queue": _BREACH, "lost": "black"}
    for label, values in queue_series(ticks).items():
        name = "lost (none)" if label == "lost" and not any(values) else label
        axis.plot(t, [_gap(v) for v in values], label=name, color=colors[label], linewidth=1.2)
    page = f"DLQ pages above {context.dlq_threshold:g}"
    axis.axhline(context.dlq_threshold, color=_BREACH, linestyle=":", label=page)
    axis.set_ylabel("messages")
    axis.set_ylim(bottom=0)


def _kv(axis: Axes, ticks: Sequence[Tick], context: FigureContext) -> None:
    axis.plot(
        _times(ticks), [_gap(s.kv_usage, 100) for s in ticks], label="KV cache usage", color="tab:purple"
    )
    alert = f"nearly full: alert at {context.kv_threshold:.0%}"
    axis.axhline(context.kv_threshold * 100, color="firebrick", linestyle="-.", label=alert)
    axis.set_ylabel("KV usage %")
    axis.set_ylim(0, 105)


def _ttft(axis: Axes, ticks: Sequence[Tick], context: FigureContext) -> None:
    """TTFT p90 on a log axis: an unloaded 0.2 s and an overloaded minute both stay readable."""
    t = _times(ticks)
    values = [_gap(s.ttft_p90) for s in ticks]
    slo = context.slo.ttft
    axis.plot(t, values, label=f"TTFT p90 ({LATENCY_WINDOW:g} s window)", color="tab:blue")
    _slo_line(axis, t, values, slo, f"SLO {duration(slo)}")
    known = [v for v in values if v > 0]
    axis.set_yscale("log")
    axis.set_ylim(min([*known, slo]) / 2, max([*known, slo]) * 2)
    axis.set_ylabel("TTFT seconds")


def _tpot(axis: Axes, ticks: Sequence[Tick], context: FigureContext) -> None:
    """TPOT in ms; the axis always reaches above the SLO, so the line and the room under it show."""
    t = _times(ticks)
    mean = [_gap(s.tpot_mean, 1000) for s in ticks]
    p90 = [_gap(s.tpot_p90, 1000) for s in ticks]
    slo = context.slo.tpot * 1000
    if any(not math.isnan(v) for v in mean):
        axis.plot(t, mean, label="TPOT mean (the adapter's)", color="tab:orange")
    axis.plot(t, p90, label="TPOT p90", color="tab:brown", alpha=0.6, linewidth=1)
    _slo_line(axis, t, p90, slo, f"SLO {slo:g} ms")
    known = [v for v in mean + p90 if not math.isnan(v)]
    axis.set_ylim(0, max([*known, slo]) * 1.2)
    axis.set_ylabel("TPOT ms")


def _slo_line(axis: Axes, t: Sequence[float], values: Sequence[float], slo: float, label: str) -> None:
    """The SLO as a red dashed line, with the stretches over it filled."""
    axis.axhline(slo, color=_BREACH, linestyle="--", linewidth=1.2, label=label)
    over = [not math.isnan(v) and v > slo for v in values]
    if any(over):
        axis.fill_between(
            t, slo, values, where=over, color=_BREACH, alpha=0.15, interpolate=True, label="over the SLO"
        )


def _replicas(axis: Axes, ticks: Sequence[Tick], context: FigureContext) -> None:
    """Ready and loading replicas stacked (their top is the existing count), with `desired` as a wide
    translucent line under the thin `existing` one: where they are equal both stay visible."""
    t = _times(ticks)
    ready = [s.ready for s in ticks]
    existing = [s.replicas for s in ticks]
    axis.fill_between(t, 0, ready, step="post", color="tab:green", alpha=0.35, linewidth=0, label="ready")
    axis.fill_between(
        t, ready, existing, step="post", color=_COLD, alpha=0.55, linewidth=0, label="loading (cold start)"
    )
    desired = [s.desired for s in ticks]
    axis.step(t, desired, where="post", color="tab:blue", linewidth=5, alpha=0.35, zorder=3, label="desired")
    axis.step(t, existing, where="post", color="black", linewidth=1.2, zorder=4, label="existing")
    consumers = [_gap(s.consumers) for s in ticks]
    if not all(math.isnan(c) for c in consumers):
        axis.step(
            t, consumers, where="post", color="tab:cyan", linestyle="--", zorder=5, label="queue consumers"
        )
    if context.max_replicas:
        axis.axhline(
            context.max_replicas, color="tab:gray", linestyle=":", label=f"max {context.max_replicas}"
        )
    top = max([context.max_replicas or 0, *existing, *desired, 1])
    axis.set_ylim(0, top + 0.8)
    axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_ylabel("replicas")


def _metric(axis: Axes, ticks: Sequence[Tick], context: FigureContext) -> None:
    """What the HPA compared with its target: per replica (AverageValue, divided by the replicas that
    existed at the sync, loading ones included) or the value itself (Value). A run that did not record
    the HPA's own per-replica value shows the total over the replicas at each tick, and says so."""
    t = _times(ticks)
    if context.per_replica:
        values = [_gap(per_replica(s)) for s in ticks]
        recorded = any(s.metric_per_replica is not None for s in ticks)
        label = "per replica, as the HPA saw it" if recorded else "total ÷ replicas at the tick"
    else:
        values = [_gap(s.metric) for s in ticks]
        label = context.metric
    axis.step(t, values, where="post", color="tab:red", label=label)
    if context.target is not None:
        axis.axhline(context.target, color="black", linestyle=":", label=f"target {context.target:g}")
        if context.tolerance:
            low, high = context.target * (1 - context.tolerance), context.target * (1 + context.tolerance)
            axis.axhspan(
                low, high, color="0.6", alpha=0.25, linewidth=0, label=f"no rescale (±{context.tolerance:g})"
            )
    axis.set_ylim(bottom=0)
    axis.set_ylabel(
        f"{context.metric}\n{'per replica' if context.per_replica else 'value'}", fontsize="small"
    )


def _bands(axes: Sequence[Any], ticks: Sequence[Tick]) -> None:
    """Alternate grey bands per profile stage, named above the top panel; orange where a replica loads."""
    for index, (name, begin, end) in enumerate(stage_spans(ticks)):
        for axis in axes:
            if index % 2:
                axis.axvspan(begin, end, color="0.93", zorder=0, linewidth=0)
        axes[0].text(
            (begin + end) / 2, 1.02, name, transform=axes[0].get_xaxis_transform(), ha="center", va="bottom"
        )
    for index, (begin, end) in enumerate(cold_starts(ticks)):
        for axis in axes:
            label = "cold start (a replica loading)" if index == 0 and axis is axes[0] else None
            axis.axvspan(begin, end, color=_COLD, alpha=0.1, zorder=0, linewidth=0, label=label)
