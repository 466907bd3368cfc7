"""One replica's life as the rehearsal measured it: asked for, started, healthy, serving, failed, stopped."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ColdStart:
    """One replica's life as measured, in emulated seconds on the run's clock (`ScaledClock.now`)."""

    name: str
    requested: float
    initial: bool = False
    """Started before the load began (the Deployment's existing replicas)."""
    port: int | None = None
    gpu: str | None = None
    spawned: float | None = None
    healthy: float | None = None
    first_token: float | None = None
    """When it served its first token (the first chunk of text of any request)."""
    retired: float | None = None
    """When the HPA took it away (drain began)."""
    stopped: float | None = None
    """When its process group was gone: the end of the GPU it held."""
    failed: float | None = None
    """When it was found dead or unresponsive after Ready (`None`: it never was)."""
    failure: str = ""
    """Why: the exit or the silence, as the watch saw it."""
    port_retries: int = 0
    """Starts again on another port because its port was taken before the engine bound it."""

    @property
    def to_healthy(self) -> float | None:
        """Seconds from the process's start to `/health`: the engine's cold start."""
        return None if self.spawned is None or self.healthy is None else self.healthy - self.spawned

    @property
    def to_ready(self) -> float | None:
        """Seconds from the HPA's request to Ready: what the HPA waits (a pending GPU included)."""
        return None if self.healthy is None else self.healthy - self.requested

    @property
    def to_first_token(self) -> float | None:
        """Seconds from the process's start to its first token served."""
        return None if self.spawned is None or self.first_token is None else self.first_token - self.spawned

    def held(self, end: float) -> float:
        """Seconds it held a GPU: from its process's start to its stop (or `end`)."""
        if self.spawned is None:
            return 0.0
        return max(0.0, (self.stopped if self.stopped is not None else end) - self.spawned)
