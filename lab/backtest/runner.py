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
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from lab.backtest.band import DECISION_SEEDS, Band
from lab.backtest.calibration import Calibration
from lab.backtest.decision import Decision, Rules, decide
from lab.backtest.fleet import Router
from lab.backtest.history import History
from lab.backtest.outcome import Scorecard, outcome
from lab.backtest.output.manifests import ScaleTarget
from lab.backtest.output.pareto import plot
from lab.backtest.output.record import Record, json_text, manifests, markdown
from lab.backtest.policy import Policy
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
    jobs: int = 1
    """Processes the replays run in."""


def evaluate(backtest: Backtest, progress: Callable[[str], None] | None = None) -> Decision:
    """Replay every policy on the seeds at the capacity estimate (its band) and once at both ends
    of the capacity's band (seed 0, or fluid without seeds); judge them. With `jobs` above one the
    replays run in that many processes (each replay is independent and deterministic)."""
    history, cal = backtest.history, backtest.calibration
    capacities = (cal.capacity.value, cal.capacity.low, cal.capacity.high)
    seeds = list(range(backtest.seeds)) if backtest.seeds > 0 else [None]
    jobs: list[_Job] = []
    for index, policy in enumerate(backtest.policies):
        jobs += [_Job(index, policy, cal.capacity.value, seed, True) for seed in seeds]
        for capacity in dict.fromkeys(capacities[1:]):
            if capacity != cal.capacity.value:
                jobs.append(_Job(index, policy, capacity, seeds[0], False))
    cards = _run(backtest, jobs, progress)
    results: list[tuple[Scorecard, Scorecard, Scorecard]] = []
    bands: list[Band | None] = []
    for index, _ in enumerate(backtest.policies):
        mine = [(job, card) for job, card in zip(jobs, cards, strict=True) if job.index == index]
        at_estimate = [card for job, card in mine if job.band]
        band = Band.of(at_estimate) if backtest.seeds > 0 else None
        point = band.median_card() if band is not None else at_estimate[0]
        ends = {job.capacity: card for job, card in mine if not job.band}
        # Without a capacity band, the pessimistic and optimistic ends are the seeds' worst and best.
        low = ends.get(cal.capacity.low) or min(at_estimate, key=lambda c: c.slo_attainment)
        high = ends.get(cal.capacity.high) or max(at_estimate, key=lambda c: c.slo_attainment)
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


@dataclass(frozen=True)
class _Job:
    """One replay: a policy at one capacity on one seed (`band`: one of the estimate's seeds)."""

    index: int
    policy: Policy
    capacity: float
    seed: int | None
    band: bool


def _replay(backtest: Backtest, job: _Job) -> Scorecard:
    model = backtest.calibration.model.with_capacity(job.capacity)
    run = simulate(
        job.policy,
        model,
        backtest.history,
        backtest.slo,
        resolution=backtest.resolution,
        planned_capacity=backtest.calibration.model.capacity,
        seed=job.seed,
        router=backtest.router,
    )
    return outcome(run, model, backtest.slo, gpus_per_replica=backtest.gpus_per_replica)


def _run(backtest: Backtest, jobs: list[_Job], progress: Callable[[str], None] | None) -> list[Scorecard]:
    """Every job's scorecard, in order: in this process, or in `backtest.jobs` processes."""
    if backtest.jobs <= 1 or len(jobs) < 2:
        cards = []
        for job in jobs:
            if progress and (job.seed in (0, None)) and job.band:
                progress(job.policy.name)
            cards.append(_replay(backtest, job))
        return cards
    # Forked workers inherit the backtest (the history may be days of ticks) instead of pickling it
    # once per job; each replay is deterministic, so the order of completion does not matter.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        max_workers=backtest.jobs, mp_context=context, initializer=_adopt, initargs=(backtest,)
    ) as pool:
        if progress:
            progress(f"{len(jobs)} replays in {backtest.jobs} processes")
        return list(pool.map(_replay_adopted, jobs, chunksize=max(1, len(jobs) // (4 * backtest.jobs))))


_ADOPTED: list[Backtest] = []


def _adopt(backtest: Backtest) -> None:
    _ADOPTED[:] = [backtest]


def _replay_adopted(job: _Job) -> Scorecard:
    return _replay(_ADOPTED[0], job)


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
