"""What a demo run records: the fleet at each tick, and each request's fate (emulated seconds).

A value nobody can know at a tick (the queue while no replica is Ready, a p90 without requests) is
`None`: an empty CSV cell, a break in the plotted line, and left out of the summary, never a zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Outcome = Literal["ok", "rejected", "aborted"]


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
    outcome: Outcome
    """`ok`, `rejected` (no serving replica or a 503), or `aborted` (its replica went away)."""
    ttft: float | None = None
    tpot: float | None = None
