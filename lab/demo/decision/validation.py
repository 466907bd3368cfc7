"""The backtest against the real loop: a `demo` run's own CSV replayed with the demo's policy.

The demo runs the emulated fleet, the real adapter (scrape source) and the HPA model in scaled time;
what its clients sent per tick is a trace (`trace_file` reads the CSV), and its recording (queue,
running, Ready replicas, completions) is what a capacity fit reads. `compare` backtests that trace
with the policy and cluster settings the demo ran with (its `summary.json`) and sets the two
outcomes side by side: SLO attainment (points apart) and replica-minutes (relative).
"""

from __future__ import annotations

import functools
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from lab.backtest.calibration import fit
from lab.backtest.inputs.trace_file import read_trace
from lab.backtest.outcome import Scorecard, outcome
from lab.backtest.policy import FORECAST, Forecast, Guard, Pipeline, Policy
from lab.backtest.simulate import simulate
from lab.demo.capacity import measure_capacity
from lab.emulator import EngineParams
from lab.slo import Slo

_CAPACITY_SEEDS: Final = 8
#: the demo's adapter scrapes every 5 emulated seconds (`DemoSettings.scrape_interval`) on ticks of
#: its (virtual) clock, and its value cache refreshes just after each tick; an HPA sync, itself on a
#: tick, reads the value of the scrape one interval before it (a sync at 60 s reads the fleet at 55 s)
DEMO_SCRAPE_SECONDS: Final = 5.0


@dataclass(frozen=True)
class Comparison:
    """One demo run and its backtest."""

    name: str
    demo_slo: float
    backtest_slo: float
    demo_replica_minutes: float
    backtest_replica_minutes: float
    backtest: Scorecard

    @property
    def slo_points(self) -> float:
        """Backtest minus demo SLO attainment, in percentage points."""
        return 100 * (self.backtest_slo - self.demo_slo)

    @property
    def replica_minutes_ratio(self) -> float:
        """Backtest over demo replica-minutes, minus 1."""
        return self.backtest_replica_minutes / self.demo_replica_minutes - 1


def demo_pipeline(settings: dict[str, Any]) -> Pipeline:
    """The metric pipeline a demo ran with (`summary.json`'s `settings`; older runs:
    `DEMO_SCRAPE_SECONDS`)."""
    seconds = float(settings.get("scrape_interval", DEMO_SCRAPE_SECONDS))
    return Pipeline(interval=seconds, lag=seconds)


def demo_policy(settings: dict[str, Any], pipeline: Pipeline | None = None) -> Policy:
    """The policy and cluster settings a demo ran with (`summary.json`'s `settings`). The forecast's
    target is per emulated second, the backtest's clock (`target_unit` recorded); a run from before
    that recorded it per second of its adapter's clock, `time_scale` times slower. Its guard is the
    HPA's second metric."""
    target = float(settings["target"])
    forecast = guard = None
    if settings["metric"] == FORECAST:
        if "target_unit" not in settings:
            target /= float(settings.get("time_scale", 1.0))
        forecast = Forecast(horizon=float(settings["sync_period"]) + float(settings["cold_start"]))
        second = settings.get("hpa_metrics", [])[1:]
        if second:
            guard = Guard(second[0]["name"], second[0]["target_type"], float(second[0]["target"]))
    return Policy(
        f"{settings['metric']}-{settings['target']:g}",
        metric=settings["metric"],
        target_type=settings["target_type"],
        target=target,
        forecast=forecast,
        guard=guard,
        min_replicas=int(settings["min_replicas"]),
        max_replicas=int(settings["max_replicas"]),
        cold_start=float(settings["cold_start"]),
        pipeline=pipeline or demo_pipeline(settings),
        sync_period=float(settings["sync_period"]),
        tolerance=float(settings["tolerance"]),
        downscale_stabilization=float(settings["downscale_stabilization"]),
    )


@functools.cache
def engine_capacity(params: EngineParams) -> float:
    """One emulated replica's throughput as a profile would measure it: the mean over several
    saturated backlogs. (The demo's own figure is one backlog's, which varies by about 15 % with the
    seed, and the demo scales its offered load by it; the backtest needs the engine's.)"""
    return statistics.fmean(measure_capacity(params, seed=seed) for seed in range(_CAPACITY_SEEDS))


def compare(out: Path, *, pipeline: Pipeline | None = None) -> Comparison:
    """Backtest the demo run in `out` (its `demo.csv` and `summary.json`) with its own policy; the
    capacity is the engine's (`engine_capacity`), the rest of the service model fitted from the
    run's recording; the pipeline is the demo's own unless `pipeline` replaces it."""
    document = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    settings, summary = document["settings"], document["summary"]
    history = read_trace(out / "demo.csv")
    model = fit(history).model.with_capacity(engine_capacity(EngineParams(**settings["engine_params"])))
    slo = Slo(float(summary["slo"]["ttft"]), float(summary["slo"]["tpot"]))
    policy = demo_policy(settings, pipeline)
    result = outcome(simulate(policy, model, history, slo), model, slo)
    return Comparison(
        policy.name,
        float(summary["slo_attainment"]),
        result.slo_attainment,
        float(summary["replica_minutes"]),
        result.replica_minutes,
        result,
    )
