"""The demo's live terminal view: one panel redrawn in place on a terminal, one line a tick elsewhere."""

from __future__ import annotations

from typing import Final, TextIO

from lab.demo.report import Tick

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


def render_panel(
    sample: Tick, *, metric: str, target: float, max_replicas: int, peak_rps: float
) -> list[str]:
    """The panel's lines for one sample (no escape codes)."""
    per_replica = "  -  " if sample.metric is None else f"{sample.metric / max(sample.replicas, 1):5.1f}"
    loading = sample.replicas - sample.ready
    return [
        f"t={sample.t:7.1f}s  stage {sample.stage:<6}  offered {sample.offered_rps:6.1f} req/s  "
        f"sent {sample.sent_rps:6.1f}  done {sample.completed_rps:6.1f}",
        f"  offered   {_bar(sample.offered_rps, peak_rps)}",
        f"  waiting   {_known(sample.waiting, '6d')}   running {_known(sample.running, '5d')}   "
        f"KV {_known(sample.kv_usage, '6.1%')}  "
        f"TPOT p90 {_ms(sample.tpot_p90)}  TTFT p90 {_ms(sample.ttft_p90)}",
        f"  {metric} per replica {per_replica} (target {target:g})",
        f"  replicas  {_replica_bar(sample.ready, loading, max_replicas)}  "
        f"desired {sample.desired:3d}  ready {sample.ready:3d}  loading {loading:3d}",
    ]


def render_line(sample: Tick) -> str:
    """One compact line per sample, for logs and pipes."""
    metric = "-" if sample.metric is None else f"{sample.metric:.1f}"
    return (
        f"t={sample.t:.0f}s stage={sample.stage} offered={sample.offered_rps:.1f} "
        f"waiting={_known(sample.waiting, 'd')} running={_known(sample.running, 'd')} "
        f"kv={_known(sample.kv_usage, '.2f')} tpot_p90={_ms(sample.tpot_p90).strip()} "
        f"metric={metric} desired={sample.desired} ready={sample.ready} replicas={sample.replicas}"
    )


class LiveView:
    """Shows samples as they come: redraws a panel on a terminal, prints a line every `every` samples otherwise."""

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

    def update(self, sample: Tick) -> None:
        """Show one sample."""
        self._count += 1
        if not self.interactive:
            if self._count % self.every == 1 or self.every == 1:
                self.stream.write(render_line(sample) + "\n")
                self.stream.flush()
            return
        lines = render_panel(
            sample,
            metric=self.metric,
            target=self.target,
            max_replicas=self.max_replicas,
            peak_rps=self.peak_rps,
        )
        self.stream.write(_UP_AND_CLEAR * self._drawn + "\n".join(lines) + "\n")
        self.stream.flush()
        self._drawn = len(lines)
