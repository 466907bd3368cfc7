"""The demo's live terminal view: one panel redrawn in place on a terminal, one line a tick elsewhere."""

from __future__ import annotations

from typing import Final, TextIO

from lab.demo.records import Tick

# Cursor up one line and clear it: redraws the panel in place without a curses dependency.
_UP_AND_CLEAR: Final = "\x1b[1A\x1b[2K"
_BAR_WIDTH: Final = 30


def _ms(value: float | None) -> str:
    return "   -  " if value is None else f"{value * 1000:5.1f}ms"


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


def render_panel(tick: Tick, *, metric: str, target: float, max_replicas: int, peak_rps: float) -> list[str]:
    """The panel's lines for one tick (no escape codes)."""
    per_replica = "  -  " if tick.metric is None else f"{tick.metric / max(tick.replicas, 1):5.1f}"
    loading = tick.replicas - tick.ready
    return [
        f"t={tick.t:7.1f}s  stage {tick.stage:<6}  offered {tick.offered_rps:6.1f} req/s  "
        f"sent {tick.sent_rps:6.1f}  done {tick.completed_rps:6.1f}",
        f"  offered   {_bar(tick.offered_rps, peak_rps)}",
        f"  waiting   {_known(tick.waiting, '6d')}   running {_known(tick.running, '5d')}   "
        f"KV {_known(tick.kv_usage, '6.1%')}  "
        f"TPOT p90 {_ms(tick.tpot_p90)}  TTFT p90 {_ms(tick.ttft_p90)}",
        f"  {metric} per replica {per_replica} (target {target:g})",
        f"  replicas  {_replica_bar(tick.ready, loading, max_replicas)}  "
        f"desired {tick.desired:3d}  ready {tick.ready:3d}  loading {loading:3d}",
    ]


def render_line(tick: Tick) -> str:
    """One compact line per tick, for logs and pipes."""
    metric = "-" if tick.metric is None else f"{tick.metric:.1f}"
    return (
        f"t={tick.t:.0f}s stage={tick.stage} offered={tick.offered_rps:.1f} "
        f"waiting={_known(tick.waiting, 'd')} running={_known(tick.running, 'd')} "
        f"kv={_known(tick.kv_usage, '.2f')} tpot_p90={_ms(tick.tpot_p90).strip()} "
        f"metric={metric} desired={tick.desired} ready={tick.ready} replicas={tick.replicas}"
    )


class LiveView:
    """Shows ticks as they come: redraws a panel on a terminal, prints a line every `every` ticks otherwise."""

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
    ) -> None:
        self.stream = stream
        self.metric = metric
        self.target = target
        self.max_replicas = max_replicas
        self.peak_rps = peak_rps
        self.interactive = stream.isatty() if interactive is None else interactive
        self.every = max(1, every)
        self._drawn = 0
        self._count = 0

    def update(self, tick: Tick) -> None:
        """Show one tick."""
        self._count += 1
        if not self.interactive:
            if self._count % self.every == 1 or self.every == 1:
                self.stream.write(render_line(tick) + "\n")
                self.stream.flush()
            return
        lines = render_panel(
            tick,
            metric=self.metric,
            target=self.target,
            max_replicas=self.max_replicas,
            peak_rps=self.peak_rps,
        )
        self.stream.write(_UP_AND_CLEAR * self._drawn + "\n".join(lines) + "\n")
        self.stream.flush()
        self._drawn = len(lines)
