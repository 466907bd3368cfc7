"""What one profiling run is asked to do (`Settings`), and what it measured (`Run`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab.load.server import Server
from lab.load.workload import Workload
from lab.profile.schema import PercentileSlo, Step
from lab.profile.twin.model import ModelKnee


@dataclass(frozen=True)
class Settings:
    """What to profile and how (durations in real seconds unless said otherwise)."""

    url: str
    model: str
    workload: Workload
    slo: PercentileSlo
    budget: float = 600.0
    time_scale: float = 1.0
    """The server's seconds per real second: an emulator's `--time-scale`; 1 for a real server."""
    seed: int = 0
    max_num_seqs: int | None = None
    launch: str | None = None
    launch_log: Path | None = None


@dataclass
class Run:
    """What a run measured, complete or not."""

    server: Server | None = None
    steps: list[Step] | None = None
    saturated_rate: float | None = None
    saturated_interval: tuple[float, float] | None = None
    prefill_seconds_per_token: float | None = None
    prefill_interval: tuple[float, float] | None = None
    prefill_probe: list[tuple[float, float]] = field(default_factory=list)
    cold_start_seconds: float | None = None
    error: str | None = None
    model_knee: ModelKnee | None = None
    """The calibrated model knee, where the open loop could not decide one in time (`search`)."""
