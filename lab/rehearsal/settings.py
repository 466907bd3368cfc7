"""The settings of one rehearsal: the engine command, where engines may run, the load, the HPA under test.

Durations are emulated seconds, the engines' own: on a GPU host `time_scale` is 1 and they are wall
seconds; with emulator processes started with `--time-scale K` they pass K times faster than the
wall clock, and so does everything here (the HPA's sync period, the scrape interval, the ticks), so
Kubernetes' constants keep their meaning while the run takes 1/K of the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab.backtest.policy import Pipeline, Policy
from lab.engine.process import UNRESPONSIVE_AFTER_SECONDS, missing_port, time_scale_mismatch
from lab.slo import Slo


class RehearsalError(ValueError):
    """Settings a rehearsal cannot run with; the message names the setting."""


@dataclass(frozen=True)
class RehearsalSettings:
    """Everything a rehearsal needs; durations in emulated seconds."""

    engine: str
    """The engine's command template, with `{port}` (and
    optionally `{gpu}`): `vllm serve ... --port {port}`."""
    model: str
    """The served model name: what requests ask for and the `model_name` of the engine's series."""
    policy: Policy
    """The HPA under test (metric, target, replicas, sync period, tolerance, window); its `cold_start`
    is ignored here: the rehearsal measures it."""
    out: Path
    gpus: tuple[str, ...] = ()
    """GPUs to run engines on, one engine each (empty: `CUDA_VISIBLE_DEVICES`, else GPU-less slots)."""
    time_scale: float = 1.0
    """Emulated seconds per wall second: 1 for a real engine, the emulators' `--time-scale` otherwise."""
    slo: Slo = field(default_factory=Slo)
    start_replicas: int = 1
    """Replicas started and Ready before the load begins (at least the policy's minimum)."""
    scrape_interval: float = 5.0
    """Emulated seconds between the adapter's scrapes of the Ready replicas."""
    tick: float = 5.0
    """Emulated seconds between observations (CSV rows, the live view)."""
    grace: float = 30.0
    """A draining replica's time to finish its requests before it is stopped
    (terminationGracePeriodSeconds)."""
    ready_within: float = 1800.0
    """Wall seconds an engine may take to become healthy before the rehearsal gives up on it."""
    unresponsive_after: float = UNRESPONSIVE_AFTER_SECONDS
    """Wall seconds without an answer from a Ready engine's `/health` before its replica has failed."""
    namespace: str = "default"
    seed: int = 0
    live: bool | None = None
    """Redraw the view in place (`None`: when the output is a terminal)."""

    def __post_init__(self) -> None:
        problem = missing_port(self.engine)
        if problem is not None:
            raise RehearsalError(problem)
        if not self.time_scale > 0:
            raise RehearsalError(f"time scale {self.time_scale!r} must be > 0")
        mismatch = time_scale_mismatch(self.engine, self.time_scale, "the rehearsal", "--time-scale")
        if mismatch is not None:
            raise RehearsalError(mismatch)
        if self.start_replicas < max(1, self.policy.min_replicas):
            raise RehearsalError(
                f"start replicas {self.start_replicas} must be at least 1 and minReplicas "
                f"({self.policy.min_replicas})"
            )
        if self.start_replicas > self.policy.max_replicas:
            raise RehearsalError(
                f"start replicas {self.start_replicas} must be at most maxReplicas "
                f"({self.policy.max_replicas})"
            )

    @property
    def pipeline(self) -> Pipeline:
        """How fresh the HPA's metric is: the adapter scrapes every interval and serves the last page."""
        return Pipeline(interval=self.scrape_interval, lag=self.scrape_interval)

    def wall(self, emulated: float) -> float:
        """Wall seconds that `emulated` seconds take."""
        return emulated / self.time_scale
