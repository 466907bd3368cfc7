"""What a demo run achieved, in the three numbers a capacity planner asks of a scaling policy.

How many requests met the latency SLO, what the fleet cost (replica-minutes, counting replicas that
are still loading, since a loading GPU is paid for), and how long the queue got. A run through an
upstream queue adds what scaling to zero is judged by (`UpstreamSummary`): GPU-replica-hours against
the same run held at one replica, how long the first message after zero waited, time at zero, and
that no message was lost.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from lab.demo.decision.comparison import Comparison
from lab.records import RequestRecord, Tick
from lab.slo import Slo
from lab.stats import percentile


@dataclass(frozen=True)
class UpstreamFacts:
    """What the runner knows of a queue run beyond the ticks (emulated seconds)."""

    queue: str
    sent: int
    """Messages the producers sent."""
    done: int
    """Messages deleted after a finished request."""
    dead_lettered: int
    """Messages in the dead-letter queue at the end."""
    lost: int
    """Messages that are nowhere (`MessageQueue.missing`): must be 0."""
    wake_waits: tuple[tuple[float, float | None, float | None], ...] = ()
    """For each first message sent while no replica existed: (sent at, waited until a consumer took it,
    until its request finished); `None` where that had not happened by the end."""
    baseline_replica_hours: float | None = None
    """GPU-replica-hours of the same run with `baseline_min_replicas` (`None`: not run)."""
    baseline_min_replicas: int | None = None


@dataclass(frozen=True)
class UpstreamSummary:
    """Scale to zero, judged: cost against a floor of replicas, the wake-up's wait, nothing lost."""

    queue: str
    messages_sent: int
    messages_done: int
    dlq_depth: int
    messages_lost: int
    replica_hours: float
    """∫ existing replicas dt, in hours of emulated time: GPU-replica-hours (a loading GPU is paid for)."""
    baseline_replica_hours: float | None
    baseline_min_replicas: int | None
    seconds_at_zero: float
    """Emulated seconds with no replica at all."""
    wake_ups: int
    """Times the fleet came back from zero replicas."""
    first_wait_after_zero: float | None
    """Seconds the first message sent at zero waited for a consumer (HPA sync, metric, cold start)."""
    first_done_after_zero: float | None
    """Seconds from that message's sending to its finished request."""

    @property
    def saved(self) -> float | None:
        """Share of the baseline's GPU-replica-hours not spent; `None` without a baseline."""
        if not self.baseline_replica_hours:
            return None
        return 1 - self.replica_hours / self.baseline_replica_hours

    def lines(self) -> list[str]:
        """The summary's lines about the queue and scaling to zero."""
        hours = f"{self.replica_hours:.2f} GPU-replica-hours"
        if self.baseline_replica_hours is not None and self.saved is not None:
            hours += (
                f" vs {self.baseline_replica_hours:.2f} with minReplicas {self.baseline_min_replicas} "
                f"({self.saved:.0%} saved)"
            )
        wake = "no wake-up from zero"
        if self.wake_ups:
            wake = (
                f"{self.wake_ups} wake-up(s); first message after zero waited "
                f"{duration(self.first_wait_after_zero)}, done after {duration(self.first_done_after_zero)}"
            )
        return [
            f"queue           {self.queue}: {self.messages_sent} sent, {self.messages_done} done, "
            f"{self.dlq_depth} in the DLQ, {self.messages_lost} lost",
            f"cost            {hours}",
            f"zero replicas   {self.seconds_at_zero:.0f} s at zero; {wake}",
        ]


@dataclass(frozen=True)
class Summary:
    """What a run achieved."""

    requests: int
    completed: int
    failed: int
    slo_attainment: float
    """Share of all sent requests that completed within both SLO bounds (failures count against it)."""
    slo: Slo
    replica_minutes: float
    """∫ existing replicas dt over the run, in minutes of emulated time."""
    peak_queue: int | None
    """Most requests waiting at a tick; `None` if no tick had a Ready replica to report it."""
    no_ready_seconds: float
    """Emulated seconds without a Ready replica: requests failed and the fleet's gauges were unknown."""
    peak_replicas: int
    min_replicas_after_peak: int
    ttft_p90: float | None
    tpot_p90: float | None
    duration: float
    peak_desired: int = 0
    """The most replicas the HPA asked for (`spec.replicas`) at any tick."""
    upstream: UpstreamSummary | None = None
    """Set for a run through an upstream queue."""
    policy: str = ""
    """The HPA the run played, targets in the cluster's units
    (`DemoSettings.hpa_text`): the picture's title too."""
    comparison: Comparison | None = None
    """The same day backtested (`lab.demo.decision.comparison`); `None` for a run through a queue."""

    def text(self) -> str:
        """A few human lines, as printed at the end of the demo."""
        queue = "n/a" if self.peak_queue is None else f"{self.peak_queue} waiting"
        outage = f"; {self.no_ready_seconds:.0f} s without a ready replica" if self.no_ready_seconds else ""

        return "\n".join(
            [
                *([f"policy          {self.policy}"] if self.policy else []),
                f"requests        {self.requests} sent, {self.completed} completed, {self.failed} failed",
                f"SLO attainment  {self.attainment_text()} ({self.slo_text()})",
                f"latency p90     TTFT {duration(self.ttft_p90)}, TPOT {duration(self.tpot_p90)}",
                f"replicas        peak {self.peak_replicas}, {self.min_replicas_after_peak} at the end; "
                f"{self.replica_minutes_text()} over {self.duration / 60:.1f} min{outage}",
                f"peak queue      {queue}",
                *(self.upstream.lines() if self.upstream else []),
                *(self.comparison_lines()),
            ]
        )

    def comparison_lines(self) -> list[str]:
        """The run beside the same day backtested, and its cost as a multiple of foresight's."""
        if self.comparison is None:
            return []
        return self.comparison.lines(self.slo_attainment, self.replica_minutes)

    def attainment_text(self) -> str:
        """`59.1%`: the SLO attainment as printed (in the text and the picture)."""
        return f"{self.slo_attainment:.1%}"

    def slo_text(self) -> str:
        """`TTFT <= 500 ms, TPOT <= 50 ms`."""
        return f"TTFT <= {duration(self.slo.ttft)}, TPOT <= {duration(self.slo.tpot)}"

    def replica_minutes_text(self) -> str:
        """`24.7 replica-minutes`."""
        return f"{self.replica_minutes:.1f} replica-minutes"


def duration(seconds: float | None) -> str:
    """A latency as printed: milliseconds below 10 s (`38 ms`), seconds with one decimal above (`64.1 s`),
    `n/a` when unknown; a tail of tens of seconds is not known to the millisecond anyway."""
    if seconds is None:
        return "n/a"
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def quantile_of(values: Sequence[float], q: float) -> float | None:
    """The `q` quantile of `values` by linear interpolation between order statistics; `None` for none."""
    return percentile(values, q) if values else None


def summarize(
    ticks: Sequence[Tick],
    requests: Sequence[RequestRecord],
    slo: Slo | None = None,
    upstream: UpstreamFacts | None = None,
    *,
    policy: str = "",
    comparison: Comparison | None = None,
) -> Summary:
    """Reduce a run to its `Summary`; replica-minutes hold each tick's count until the next tick."""
    slo = slo or Slo()
    done = [r for r in requests if r.outcome == "ok"]
    good = sum(
        1
        for r in done
        if r.ttft is not None and r.ttft <= slo.ttft and (r.tpot is None or r.tpot <= slo.tpot)
    )
    replica_seconds = sum(a.replicas * (b.t - a.t) for a, b in itertools.pairwise(ticks))
    no_ready_seconds = sum(b.t - a.t for a, b in itertools.pairwise(ticks) if a.ready == 0)
    peak_at = max(range(len(ticks)), key=lambda i: ticks[i].replicas, default=0)
    return Summary(
        requests=len(requests),
        completed=len(done),
        failed=len(requests) - len(done),
        slo_attainment=good / len(requests) if requests else 1.0,
        slo=slo,
        replica_minutes=replica_seconds / 60,
        peak_queue=max((s.waiting for s in ticks if s.waiting is not None), default=None),
        no_ready_seconds=no_ready_seconds,
        peak_replicas=ticks[peak_at].replicas if ticks else 0,
        min_replicas_after_peak=min((s.replicas for s in ticks[peak_at:]), default=0),
        ttft_p90=quantile_of([r.ttft for r in done if r.ttft is not None], 0.9),
        tpot_p90=quantile_of([r.tpot for r in done if r.tpot is not None], 0.9),
        duration=ticks[-1].t - ticks[0].t if ticks else 0.0,
        peak_desired=max((s.desired for s in ticks), default=0),
        upstream=None if upstream is None else summarize_upstream(ticks, upstream),
        policy=policy,
        comparison=comparison,
    )


def summarize_upstream(ticks: Sequence[Tick], facts: UpstreamFacts) -> UpstreamSummary:
    """The queue run's `UpstreamSummary`: cost and time at zero from the ticks, the rest from `facts`."""
    pairs = list(itertools.pairwise(ticks))
    first = facts.wake_waits[0] if facts.wake_waits else (0.0, None, None)
    return UpstreamSummary(
        queue=facts.queue,
        messages_sent=facts.sent,
        messages_done=facts.done,
        dlq_depth=facts.dead_lettered,
        messages_lost=facts.lost,
        replica_hours=replica_hours(ticks),
        baseline_replica_hours=facts.baseline_replica_hours,
        baseline_min_replicas=facts.baseline_min_replicas,
        seconds_at_zero=sum(b.t - a.t for a, b in pairs if a.replicas == 0),
        wake_ups=sum(1 for a, b in pairs if a.replicas == 0 and b.replicas > 0),
        first_wait_after_zero=first[1],
        first_done_after_zero=first[2],
    )


def replica_hours(ticks: Sequence[Tick]) -> float:
    """∫ existing replicas dt in hours, each tick's count held until the next tick."""
    return sum(a.replicas * (b.t - a.t) for a, b in itertools.pairwise(ticks)) / 3600
