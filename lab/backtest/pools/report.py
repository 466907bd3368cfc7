"""Two-pool runs reduced to what a planner compares, over seeds: SLO attainment and GPU time per pool.

A pair run becomes a `Scorecard` (the one-pool backtest's row, so `Band` keeps its median and range
over the seeds), with each pool's GPU-hours beside it. `compare` replays every pair policy on the same
seeds and `verdict` says which holds the SLO on every seed for the least GPU time (median GPU-hours).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.backtest.band import Band, Spread
from lab.backtest.fleet import Router
from lab.backtest.history import History
from lab.backtest.outcome import Scorecard, ttft_percentile
from lab.backtest.pools.model import PairModel
from lab.backtest.pools.policy import PairPolicy
from lab.backtest.pools.replay import PairRun, simulate_pair
from lab.slo import Slo


@dataclass(frozen=True)
class PairBand:
    """One pair policy over the seeds: the band of its scorecards, and each pool's GPU-hours."""

    policy: PairPolicy
    band: Band
    prefill_gpu_hours: Spread
    decode_gpu_hours: Spread

    @property
    def gpu_hours(self) -> Spread:
        return Spread.of([c.gpu_hours for c in self.band.cards])

    def holds(self, attainment: float) -> bool:
        """Every seed meets the SLO at `attainment` (the band's low end: the worst seed)."""
        return self.band.slo.low >= attainment


def card(run: PairRun, *, gpus_per_replica: float = 1.0) -> Scorecard:
    """The table row of a pair run (`capacity`: 0, there is no one replica's capacity)."""
    tally = run.tally
    judged = tally.served + tally.dropped

    def share(good: float) -> float:
        return good / judged if judged > 0 else 1.0

    return Scorecard(
        name=run.policy.name,
        description=run.policy.describe(),
        kind="candidate",
        capacity=0.0,
        requests=run.arrived,
        slo_attainment=share(tally.both_good),
        ttft_attainment=share(tally.ttft_good),
        tpot_attainment=share(tally.tpot_good),
        ttft_p90=ttft_percentile(tally.ttfts, 0.9),
        ttft_p99=ttft_percentile(tally.ttfts, 0.99),
        gpu_hours=tally.replica_seconds * gpus_per_replica / 3600,
        replica_minutes=tally.replica_seconds / 60,
        scale_events=run.scale_events,
        oscillations=0,
        peak_replicas=run.peak["prefill"] + run.peak["decode"],
        dropped=tally.dropped,
        in_flight_end=run.in_flight_end,
        seconds=run.seconds,
    )


def replay_pair(
    policy: PairPolicy,
    pair: PairModel,
    history: History,
    slo: Slo,
    *,
    seeds: Sequence[int | None],
    resolution: float = 1.0,
    router: Router = "service",
    gpus_per_replica: float = 1.0,
) -> PairBand:
    """`policy` on each seed (`None`: the fluid replay), the same seeds for every policy."""
    runs = [
        simulate_pair(policy, pair, history, slo, resolution=resolution, seed=s, router=router) for s in seeds
    ]
    hours = gpus_per_replica / 3600
    return PairBand(
        policy,
        Band.of([card(r, gpus_per_replica=gpus_per_replica) for r in runs]),
        Spread.of([r.prefill_seconds * hours for r in runs]),
        Spread.of([r.decode_seconds * hours for r in runs]),
    )


def compare(
    policies: Sequence[PairPolicy],
    pair: PairModel,
    history: History,
    slo: Slo,
    *,
    seeds: Sequence[int | None],
    resolution: float = 1.0,
    router: Router = "service",
    gpus_per_replica: float = 1.0,
) -> list[PairBand]:
    """Every policy's band on the same seeds."""
    return [
        replay_pair(
            p,
            pair,
            history,
            slo,
            seeds=seeds,
            resolution=resolution,
            router=router,
            gpus_per_replica=gpus_per_replica,
        )
        for p in policies
    ]


def verdict(bands: Sequence[PairBand], attainment: float) -> tuple[PairBand | None, str]:
    """The policy that holds the SLO on every seed for the fewest median GPU-hours, and why."""
    holding = [b for b in bands if b.holds(attainment)]
    if not holding:
        return None, f"no policy meets {attainment:.1%} of requests within the SLO on every seed"
    best = min(holding, key=lambda b: b.gpu_hours.median)
    others = sorted((b for b in holding if b is not best), key=lambda b: b.gpu_hours.median)
    margin = f"; next {others[0].policy.name} at {others[0].gpu_hours.median:.1f} GPU-h" if others else ""
    return best, (
        f"{best.policy.name} holds the SLO on every seed (worst {best.band.slo.low:.2%}) for "
        f"{best.gpu_hours.median:.1f} GPU-h{margin}"
    )


def table(bands: Sequence[PairBand], attainment: float) -> str:
    """A Markdown table: SLO band, GPU-hours per pool and in all, peaks, holds or not."""
    lines = [
        "| policy | SLO attainment (worst-best) | TTFT p90 s | "
        "prefill GPU-h | decode GPU-h | GPU-h | holds |",
        "|---|---|---|---|---|---|---|",
    ]
    for b in bands:
        p90 = b.band.ttft_p90.text(digits=2) if b.band.ttft_p90 else "-"
        lines.append(
            f"| {b.policy.name} | {b.band.slo.text(100, 2)} | {p90} | {b.prefill_gpu_hours.text()} | "
            f"{b.decode_gpu_hours.text()} | {b.gpu_hours.text()} | {'yes' if b.holds(attainment) else 'no'} |"
        )
    return "\n".join(lines)
