"""One backtest: traffic → calibration → policies → simulation at three capacities → decision → files.

Files written in `out` (as `demo` writes its own):

* `policies.csv`: one row per policy at the capacity estimate, with its verdict;
* `pareto.png`: SLO attainment against GPU-hours;
* `decision.md`, `decision.json`: the decision record;
* `hpa.yaml`, `scaledobject.yaml` (and `adapter-config.yaml` where the metric needs one): the
  recommended policy's manifests, when one is supported.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from lab.backtest.band import DECISION_SEEDS, Band, replay
from lab.backtest.calibration import Calibration
from lab.backtest.decision import Decision, Rules, decide
from lab.backtest.fleet import Router
from lab.backtest.history import History
from lab.backtest.manifests import ScaleTarget
from lab.backtest.outcome import Scorecard, outcome
from lab.backtest.pareto import plot
from lab.backtest.policy import Policy
from lab.backtest.record import Record, json_text, manifests, markdown
from lab.backtest.simulate import simulate
from lab.slo import Slo

CSV_NAME: Final = "policies.csv"
PNG_NAME: Final = "pareto.png"
MARKDOWN_NAME: Final = "decision.md"
JSON_NAME: Final = "decision.json"


@dataclass(frozen=True)
class Backtest:
    """What one backtest is asked to do."""

    history: History
    calibration: Calibration
    policies: list[Policy]
    out: Path
    slo: Slo = field(default_factory=Slo)
    rules: Rules = field(default_factory=Rules)
    target: ScaleTarget = field(default_factory=ScaleTarget)
    resolution: float = 1.0
    gpus_per_replica: float = 1.0
    command: str = "vllm-autoscale backtest"
    seeds: int = DECISION_SEEDS
    """Seeded replays per policy at the capacity estimate (`lab.backtest.band`); 0: one fluid replay."""
    router: Router = "service"
    """How the fleet's requests reach its replicas: a Service's random spread, or least in flight."""


def evaluate(backtest: Backtest, progress: Callable[[str], None] | None = None) -> Decision:
    """Replay every policy on the seeds at the capacity estimate (its band) and once at both ends
    of the capacity's band (seed 0, or fluid without seeds); judge them."""
    history, cal = backtest.history, backtest.calibration
    capacities = (cal.capacity.value, cal.capacity.low, cal.capacity.high)
    results: list[tuple[Scorecard, Scorecard, Scorecard]] = []
    bands: list[Band | None] = []
    for policy in backtest.policies:
        if progress:
            progress(policy.name)
        band = None
        done: dict[float, Scorecard] = {}
        if backtest.seeds > 0:
            band = replay(
                policy,
                cal.model,
                history,
                backtest.slo,
                seeds=backtest.seeds,
                resolution=backtest.resolution,
                planned_capacity=cal.model.capacity,
                router=backtest.router,
                gpus_per_replica=backtest.gpus_per_replica,
            )
            done[cal.capacity.value] = band.median_card()
        for capacity in capacities:
            if capacity in done:
                continue
            model = cal.model.with_capacity(capacity)
            run = simulate(
                policy,
                model,
                history,
                backtest.slo,
                resolution=backtest.resolution,
                planned_capacity=cal.model.capacity,
                seed=0 if backtest.seeds > 0 else None,
                router=backtest.router,
            )
            done[capacity] = outcome(run, model, backtest.slo, gpus_per_replica=backtest.gpus_per_replica)
        point, low, high = (done[c] for c in capacities)
        if band is not None and capacities[1] == capacities[0]:
            # Without a capacity band the pessimistic end is the estimate's worst seed.
            low = min(band.cards, key=lambda c: c.slo_attainment)
        if band is not None and capacities[2] == capacities[0]:
            high = max(band.cards, key=lambda c: c.slo_attainment)
        results.append((point, low, high))
        bands.append(band)
    gap_share = 1.0 - history.known_seconds / history.duration
    return decide(
        backtest.policies,
        results,
        cal.capacity,
        backtest.rules,
        requests=history.requests,
        gap_share=gap_share,
        bands=bands,
    )


def write_csv(path: Path, decision: Decision) -> None:
    """One row per policy: its verdict and its outcome at the capacity estimate."""
    names = [f.name for f in dataclasses.fields(Scorecard)]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*names, "verdict", "reason"])
        for judged in decision.judged:
            row = dataclasses.asdict(judged.point)
            writer.writerow(
                [*("" if row[n] is None else _cell(row[n]) for n in names), judged.verdict, judged.reason]
            )


def _cell(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def write(backtest: Backtest, decision: Decision) -> Record:
    """Write every file into `backtest.out`; returns the record."""
    out = backtest.out
    out.mkdir(parents=True, exist_ok=True)
    record = Record(
        backtest.history, backtest.calibration, backtest.slo, decision, backtest.target, backtest.command
    )
    write_csv(out / CSV_NAME, decision)
    title = f"{backtest.history.source}: {len(backtest.policies)} policies"
    plot(out / PNG_NAME, decision, title=title if len(title) < 110 else title[:107] + "...")
    (out / MARKDOWN_NAME).write_text(markdown(record), encoding="utf-8")
    (out / JSON_NAME).write_text(json_text(record), encoding="utf-8")
    for stale in ("hpa.yaml", "scaledobject.yaml", "adapter-config.yaml"):
        (out / stale).unlink(missing_ok=True)
    if decision.recommended is not None:
        for name, text in manifests(decision.recommended, backtest.target).items():
            (out / f"{name}.yaml").write_text(text, encoding="utf-8")
    return record
