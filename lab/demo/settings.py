"""The settings of one demo run: the traffic profile, the HPA under test and the emulated fleet.

Durations are emulated seconds (see `lab.demo.runner`); a `None` takes the profile's value, so
`--profile smoke` and the default profile each bring their own time constants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab.demo.capacity import ENGINES
from lab.demo.summary import Slo
from lab.emulator import EngineParams
from lab.hpa import TargetType
from lab.loadgen import Profile


@dataclass(frozen=True)
class DemoSettings:
    """Everything a demo run needs; durations in emulated seconds."""

    profile: Profile
    out: Path
    metric: str = "vllm_requests_inflight"
    target_type: TargetType = "AverageValue"
    target: float | None = None
    """`None`: 0.75 × max_num_seqs for AverageValue (DESIGN.md), 1 for Value."""
    engine: str = "demo"
    time_scale: float | None = None
    """Emulated seconds per real second; `None` takes the profile's."""
    sync_period: float = 15.0
    tolerance: float = 0.1
    downscale_stabilization: float | None = None
    """`None` takes the profile's."""
    cold_start: float | None = None
    """A new replica's load delay; `None` takes the profile's."""
    min_replicas: int = 1
    max_replicas: int = 8
    capacity: float | None = None
    """Requests/s of one replica; `None` measures it for the engine preset."""
    scrape_interval: float = 0.5
    """Real seconds between the adapter's scrapes (5 emulated seconds at 10x, a third of a sync period)."""
    tick: float = 5.0
    seed: int = 0
    slo: Slo = field(default_factory=Slo)
    namespace: str = "default"
    live: bool | None = None
    """Redraw the view in place (`None`: when the output is a terminal)."""

    @property
    def params(self) -> EngineParams:
        """The engine preset's parameters."""
        return ENGINES[self.engine]

    @property
    def scale(self) -> float:
        """Emulated seconds per real second in effect."""
        return self.time_scale or self.profile.time_scale

    @property
    def stabilization(self) -> float:
        """The downscale stabilization window in effect (emulated seconds)."""
        return self.downscale_stabilization or self.profile.downscale_stabilization

    @property
    def load_delay(self) -> float:
        """A new replica's cold start in effect (emulated seconds)."""
        return self.profile.cold_start if self.cold_start is None else self.cold_start

    @property
    def target_value(self) -> float:
        """The HPA target in effect."""
        if self.target is not None:
            return self.target
        return 0.75 * self.params.max_num_seqs if self.target_type == "AverageValue" else 1.0
