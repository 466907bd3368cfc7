"""The demo's live terminal view: one panel redrawn in place on a terminal, one line a tick elsewhere.

Latencies are the ones the SLO speaks of, flagged when over it: TTFT as its p90, TPOT as its mean (the
statistic the adapter serves as `vllm_tpot_seconds`). For an AverageValue target the metric is shown per
replica as the HPA divides it, by every replica that exists, so the panel says when loading replicas
are in the count (they hold no requests yet and pull the average down).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TextIO

from lab.demo.summary import duration
from lab.records import Tick, per_replica
from lab.slo import Slo

# Cursor up one line and clear it: redraws the panel in place without a curses dependency.
_UP_AND_CLEAR: Final = "\x1b[1A\x1b[2K"
_BAR_WIDTH: Final = 30


def _latency(value: float | None) -> str:
    """`38.2 ms` below a second, `10.86 s` above, `-` when unknown."""
    if value is None:
        return "-"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def _known(value: float | None, spec: str) -> str:
    """`value` formatted with `spec`, or `-` padded to the same width when it is unknown."""
    width = int("".join(c for c in spec.split(".")[0] if c.isdigit()) or 1)
    return "-".rjust(width) if value is None else format(value, spec)


def _bar(value: float, full: float, width: int = _BAR_WIDTH) -> str:
    filled = 0 if full <= 0 else min(width, round(width * value / full))
    return "█" * filled + "·" * (width - filled)


def _replica_bar(ready: int, loading: int, maximum: int) -> str:
    """One cell per replica up to the HPA's maximum: serving, loading (cold start), absent."""
    ready, loading = min(ready, maximum), min(loading, max(0, maximum - ready))
    return "█" * ready + "░" * loading + "·" * (maximum - ready - loading)


def breaches(tick: Tick, slo: Slo) -> list[str]:
    """The latencies over their SLO at this tick: `TTFT` (its p90), `TPOT` (its mean)."""
    over = []
    if tick.ttft_p90 is not None and tick.ttft_p90 > slo.ttft:
        over.append("TTFT")
    if tick.tpot_mean is not None and tick.tpot_mean > slo.tpot:
        over.append("TPOT")
    return over


def _against(value: float | None, bound: float) -> str:
    """`OVER SLO 500 ms` or `(SLO 500 ms)` after a latency."""
    if value is not None and value > bound:
        return f"OVER SLO {duration(bound)}"
    return f"(SLO {duration(bound)})"


def metric_text(tick: Tick, *, metric: str, target: float, per_replica_target: bool = True) -> str:
    """`m per replica 12.4 (target 12; 4 of 8 replicas loading)`, or the value for a Value target."""
    if not per_replica_target:
        return f"{metric} {_known(tick.metric, '.3g')} (target {target:g})"
    value = per_replica(tick)
    note = f"; {tick.loading} of {tick.replicas} replicas loading" if tick.loading else ""
    return f"{metric} per replica {_known(value, '.1f')} (target {target:g}{note})"


def render_panel(
    tick: Tick,
    *,
    metric: str,
    target: float,
    max_replicas: int,
    peak_rps: float,
    slo: Slo | None = None,
    per_replica_target: bool = True,
) -> list[str]:
    """The panel's lines for one tick (no escape codes)."""
    slo = slo or Slo()
    queue = [f"  upstream  {queue_text(tick)}"] if tick.queue_depth is not None else []
    return [
        f"t={tick.t:7.1f}s  stage {tick.stage:<6}  offered {tick.offered_rps:6.1f} req/s  "
        f"sent {tick.sent_rps:6.1f}  done {tick.completed_rps:6.1f}",
        f"  offered   {_bar(tick.offered_rps, peak_rps)}",
        f"  waiting   {_known(tick.waiting, '6d')}   running {_known(tick.running, '5d')}   "
        f"KV {_known(tick.kv_usage, '6.1%')}",
        f"  TTFT p90  {_latency(tick.ttft_p90):>9} {_against(tick.ttft_p90, slo.ttft):<20}"
        f"TPOT mean {_latency(tick.tpot_mean):>9} {_against(tick.tpot_mean, slo.tpot)}",
        f"  {metric_text(tick, metric=metric, target=target, per_replica_target=per_replica_target)}",
        f"  replicas  {_replica_bar(tick.ready, tick.loading, max_replicas)}  "
        f"desired {tick.desired:3d}  ready {tick.ready:3d}  loading {tick.loading:3d}",
        *queue,
    ]


def queue_text(tick: Tick) -> str:
    """`queue 330 messages  DLQ 4  consumers 4  lost 0` for a run through an upstream queue."""
    return (
        f"queue {_known(tick.queue_depth, '6d')} messages  DLQ {_known(tick.dlq_depth, '4d')}  "
        f"consumers {_known(tick.consumers, '3d')}  lost {_known(tick.messages_lost, 'd')}"
    )


def render_line(tick: Tick, *, slo: Slo | None = None, per_replica_target: bool = True) -> str:
    """One compact `key=value` line per tick, for logs and pipes; `slo_breach=` names what is over."""
    over = breaches(tick, slo or Slo())
    metric = "-" if tick.metric is None else f"{tick.metric:.1f}"
    average = per_replica(tick) if per_replica_target else None
    fields: Sequence[str] = [
        f"t={tick.t:.0f}s",
        f"stage={tick.stage}",
        f"offered={tick.offered_rps:.1f}",
        f"waiting={_known(tick.waiting, 'd')}",
        f"running={_known(tick.running, 'd')}",
        f"kv={_known(tick.kv_usage, '.2f')}",
        f"ttft_p90={_latency(tick.ttft_p90).replace(' ', '')}",
        f"tpot_mean={_latency(tick.tpot_mean).replace(' ', '')}",
        f"metric={metric}",
        *([f"per_replica={_known(average, '.1f')}"] if per_replica_target else []),
        f"desired={tick.desired}",
        f"ready={tick.ready}",
        f"replicas={tick.replicas}",
        *(
            [
                f"queue={tick.queue_depth}",
                f"dlq={_known(tick.dlq_depth, 'd')}",
                f"lost={_known(tick.messages_lost, 'd')}",
            ]
            if tick.queue_depth is not None
            else []
        ),
        *([f"slo_breach={','.join(over)}"] if over else []),
    ]
    return " ".join(fields)


class LiveView:
    """Shows ticks as they come: redraws a panel on a
    terminal, prints a line every `every` ticks otherwise."""

    def __init__(
        self,
        stream: TextIO,
        *,
        metric: str,
        target: float,
        max_replicas: int,
        peak_rps: float,
        interactive: bool | None = None,
        every: int = 5,
        slo: Slo | None = None,
        target_type: str = "AverageValue",
    ) -> None:
        self.stream = stream
        self.metric = metric
        self.target = target
        self.max_replicas = max_replicas
        self.peak_rps = peak_rps
        self.interactive = stream.isatty() if interactive is None else interactive
        self.every = max(1, every)
        self.slo = slo or Slo()
        self.per_replica_target = target_type == "AverageValue"
        self._drawn = 0
        self._count = 0

    def update(self, tick: Tick) -> None:
        """Show one tick."""
        self._count += 1
        if not self.interactive:
            if self._count % self.every == 1 or self.every == 1:
                line = render_line(tick, slo=self.slo, per_replica_target=self.per_replica_target)
                self.stream.write(line + "\n")
                self.stream.flush()
            return
        lines = render_panel(
            tick,
            metric=self.metric,
            target=self.target,
            max_replicas=self.max_replicas,
            peak_rps=self.peak_rps,
            slo=self.slo,
            per_replica_target=self.per_replica_target,
        )
        self.stream.write(_UP_AND_CLEAR * self._drawn + "\n".join(lines) + "\n")
        self.stream.flush()
        self._drawn = len(lines)
