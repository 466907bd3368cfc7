"""Ticks for the report's tests: a small run with a spike,
a cold start and a stretch without a Ready replica."""

from __future__ import annotations

from lab.records import Tick


def tick(
    t: float,
    replicas: int,
    *,
    waiting: int = 0,
    stage: str = "idle",
    metric: float | None = 4.0,
    ready: int | None = None,
    desired: int | None = None,
    ttft_p90: float | None = 0.018,
    tpot_mean: float | None = None,
) -> Tick:
    """One tick with every gauge known; `ready` defaults to one replica loading (at least one Ready)."""
    return Tick(
        t=t,
        stage=stage,
        offered_rps=10.0,
        sent_rps=9.5,
        completed_rps=9.0,
        waiting=waiting,
        running=3,
        kv_usage=0.25,
        tpot_p90=0.0021 if t else None,
        ttft_p90=ttft_p90,
        tpot_mean=tpot_mean,
        metric=metric,
        desired=replicas if desired is None else desired,
        ready=max(replicas - 1, 1) if ready is None else ready,
        replicas=replicas,
    )


def gap(t: float, replicas: int) -> Tick:
    """A tick with no Ready replica: nothing reports a queue, a KV cache or a latency."""
    return Tick(
        t=t,
        stage="spike",
        offered_rps=10.0,
        sent_rps=9.5,
        completed_rps=0.0,
        waiting=None,
        running=None,
        kv_usage=None,
        tpot_p90=None,
        ttft_p90=None,
        metric=None,
        desired=replicas,
        ready=0,
        replicas=replicas,
    )


RUN = [
    tick(0, 1),
    tick(60, 3, waiting=40, stage="spike"),
    tick(120, 5, waiting=7, stage="spike", metric=None),
    tick(180, 2, stage="idle"),
    tick(240, 2, stage="idle"),
]

GAP_RUN = [tick(0, 2, waiting=5), gap(60, 2), gap(120, 3), tick(180, 3, waiting=9), tick(240, 3)]
