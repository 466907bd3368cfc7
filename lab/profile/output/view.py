"""The live progress of a profile: a panel redrawn in place on a terminal, one line per step elsewhere."""

from __future__ import annotations

from typing import Final, TextIO

from lab.load.metrics_reader import Snapshot
from lab.profile.schema import Step
from lab.profile.steps import percentile_key
from lab.units import format_duration
from lab.virtual_time import loop_time

# Cursor up one line and clear it: redraws the panel without a curses dependency (as the demo's view).
_UP_AND_CLEAR: Final = "\x1b[1A\x1b[2K"
_BAR: Final = 24
_HEADER: Final = "  step        offered  achieved  in flight   KV   TTFT {key:>5}  TPOT {key:>5}  SLO  queue"


def _bar(fraction: float, width: int = _BAR) -> str:
    filled = round(width * min(max(fraction, 0.0), 1.0))
    return "█" * filled + "·" * (width - filled)


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return "inf" if seconds == float("inf") else f"{seconds * 1000:.0f}ms"


def step_line(step: Step, percentile: float) -> str:
    """One row of the step table."""
    key = percentile_key(percentile)
    label = f"{step.clients} clients" if step.kind == "concurrency" else "rate"
    return (
        f"  {label:<10} {step.offered_rate:8.3g} {step.achieved_rate:9.3g} {step.concurrency:10.1f} "
        f"{step.kv_usage:5.0%} {_ms(step.ttft_seconds.get(key)):>10} {_ms(step.tpot_seconds.get(key)):>10}  "
        f"{'yes' if step.slo_met else 'NO':<4} {'stable' if step.queue_stable else 'GROWS'}"
    )


class ProgressView:
    """Shows the phase, the live numbers and every finished step."""

    def __init__(
        self, stream: TextIO, *, title: str, budget: float, percentile: float, interactive: bool | None = None
    ) -> None:
        self.stream = stream
        self.title = title
        self.budget = budget
        self.percentile = percentile
        self.interactive = stream.isatty() if interactive is None else interactive
        self.started = loop_time()
        self.rows: list[str] = []
        self._phase = "starting"
        self._span = (0.0, 0.0)
        self._live = ""
        self._drawn = 0

    def phase(self, label: str, start: float, end: float) -> None:
        """A new phase (warm-up, a step) running from `start` to `end` on the profile's clock."""
        self._phase, self._span = label, (start, end)
        if not self.interactive:
            self._write(f"{label}: {format_duration(end - start)}")
        self._draw()

    def tick(self, now: float, snapshot: Snapshot | None, inflight: int, done: int) -> None:
        """Live numbers: the client's requests, and the server's last snapshot."""
        server = (
            f"running {snapshot.running:.0f}  waiting {snapshot.waiting:.0f}  KV {snapshot.kv_usage:.0%}  "
            f"preemptions {snapshot.preemptions:.0f}"
            if snapshot
            else "server: no snapshot yet"
        )
        start, end = self._span
        progress = (now - start) / (end - start) if end > start else 0.0
        self._live = (
            f"  {self._phase:<34} {_bar(progress, 16)}\n  in flight {inflight:<5} done {done:<7} {server}"
        )
        self._draw()

    def step(self, step: Step) -> None:
        """A finished step: a new row of the table."""
        row = step_line(step, self.percentile)
        self.rows.append(row)
        if not self.interactive:
            self._write(row)
        self._draw()

    def message(self, text: str) -> None:
        """A line that stays (a warning, the outcome)."""
        if self.interactive:
            self._clear()
        self._write(text)
        self._draw()

    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()

    def _clear(self) -> None:
        self.stream.write(_UP_AND_CLEAR * self._drawn)
        self._drawn = 0

    def _draw(self) -> None:
        if not self.interactive:
            return
        elapsed = loop_time() - self.started
        key = percentile_key(self.percentile)
        lines = [
            f"{self.title}  {format_duration(elapsed)} of "
            f"{format_duration(self.budget)} {_bar(elapsed / self.budget)}",
            *self._live.splitlines(),
            _HEADER.format(key=key),
            *self.rows,
        ]
        self._clear()
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()
        self._drawn = len(lines)
