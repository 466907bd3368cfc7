"""The rehearsal's prediction: the backtest of the same trace and policy, and the gap between them.

The trace is what the clients sent (each request's time and output length, on a 1 s grid, until the
run's last tick, so both count the same span); the policy is the one the rehearsal's HPA ran, with the
cold start it measured (from the HPA's request to Ready, the mean over the replicas it started); the
replica is the profile's service model (`lab.backtest.inputs.profile_calibration.from_profile`, what `backtest
--profile` reads, the file the engine's twin is made from). The fleet model starts from the replicas
the rehearsal started with, and reads the metric as the rehearsal's adapter served it (refreshed every
scrape, one scrape late).

The gap is the backtest's minus the rehearsal's: SLO attainment in points, replica-minutes relative
(`lab.demo.validation.Comparison`, as the demo's validation reports it).

The band (`predict_band`) is the prediction made before the run: the traffic the rehearsal was asked
to play (the trace's rates, compressed and rescaled, until the run's end) on `BAND_SEEDS` seeded
replays, whole requests at Poisson instants behind the rehearsal's least-in-flight router, the HPA
reading counts at its scrapes (`lab.backtest.band`). The live run is one more draw of the same
traffic: where the model is right, it falls outside the range of n seeds with probability 2/(n + 1).
A rehearsal campaign judges six outcomes (SLO attainment and replica-minutes of three days), and all
six land inside with probability at least 90 % only where each does with 98.3 %: 119 seeds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from lab.backtest.band import Band
from lab.backtest.calibration import Calibration
from lab.backtest.history import History
from lab.backtest.outcome import Scorecard, outcome
from lab.backtest.policy import Policy
from lab.backtest.simulate import Timeline, simulate
from lab.demo.decision.validation import Comparison
from lab.demo.summary import Summary
from lab.rehearsal.clients import Sent
from lab.rehearsal.load import Load
from lab.rehearsal.replicas import ColdStart
from lab.slo import Slo

#: Seconds per step of the trace the backtest replays: the fleet model's own tick.
TRACE_STEP: Final = 1.0
#: Seeds of the rehearsal's band: a range that holds one more draw with probability 118/120.
BAND_SEEDS: Final = 119


@dataclass(frozen=True)
class Prediction:
    """The backtest of a rehearsal."""

    policy: Policy
    """The rehearsal's policy with the measured cold start."""
    calibration: Calibration
    history: History
    scorecard: Scorecard


def measured_cold_start(records: Sequence[ColdStart]) -> float | None:
    """Mean seconds from the HPA's request to Ready over the replicas it started; without any, the
    mean over the first replicas' process start to healthy; `None` when no replica became healthy."""
    asked = [r.to_ready for r in records if not r.initial and r.to_ready is not None]
    if asked:
        return statistics.fmean(asked)
    first = [r.to_healthy for r in records if r.to_healthy is not None]
    return statistics.fmean(first) if first else None


def sent_history(sent: Sequence[Sent], until: float, start_replicas: int, source: str) -> History:
    """What the clients sent, on a `TRACE_STEP` grid from 0 to `until`: arrivals and mean output tokens
    per step, and the replicas the run started with."""
    steps = max(1, math.ceil(until / TRACE_STEP))
    arrivals = [0.0] * steps
    tokens = [0.0] * steps
    for at, _prompt, output in sent:
        index = min(steps - 1, max(0, int(at / TRACE_STEP)))
        arrivals[index] += 1
        tokens[index] += output
    replicas = [math.nan] * steps
    replicas[0] = float(start_replicas)
    return History(
        step=TRACE_STEP,
        arrivals=tuple(arrivals),
        source=source,
        replicas=tuple(replicas),
        output_tokens=tuple(t / a if a else math.nan for t, a in zip(tokens, arrivals, strict=True)),
        notes=("the requests the rehearsal's clients sent",),
    )


def predict(
    policy: Policy, calibration: Calibration, history: History, slo: Slo, cold_start: float
) -> Prediction:
    """Backtest `history` with `policy` (its cold start
    replaced by `cold_start`) on `calibration`'s replica."""
    measured = replace(policy, cold_start=cold_start)
    model = calibration.model
    run = simulate(measured, model, history, slo, resolution=TRACE_STEP)
    return Prediction(measured, calibration, history, outcome(run, model, slo))


def gap(summary: Summary, prediction: Prediction) -> Comparison:
    """The rehearsal's outcome and its prediction side by side."""
    card = prediction.scorecard
    return Comparison(
        prediction.policy.name,
        summary.slo_attainment,
        card.slo_attainment,
        summary.replica_minutes,
        card.replica_minutes,
        card,
    )


@dataclass(frozen=True)
class BandPrediction:
    """The rehearsal's traffic on many seeds: the band, and each seed's run over time."""

    policy: Policy
    history: History
    band: Band
    timelines: tuple[Timeline, ...]


def planned_history(load: Load, until: float, start_replicas: int) -> History:
    """The traffic the rehearsal was asked to play, in seconds of the run, until `until`: each step's
    rate (0 in a gap, where nothing is sent) and, where the trace has them, its mean output tokens.
    Past the trace's end come steps of nothing sent: the live run's replica-minutes count its drain
    until `until`, so the band's must too (a day that ended 10 s into its drain on two replicas read
    0.3 replica-minutes above a band that stopped with the trace)."""
    played = min(len(load.history.arrivals), math.ceil(until / load.step))
    steps = max(1, math.ceil(until / load.step))
    tokens = load.history.output_tokens
    replicas = [math.nan] * steps
    replicas[0] = float(start_replicas)
    drain = steps - played
    return History(
        step=load.step,
        arrivals=tuple(load.rate(i) * load.step for i in range(played)) + (0.0,) * drain,
        source=f"the rehearsal's traffic: {load.source}",
        replicas=tuple(replicas),
        output_tokens=None if tokens is None else (*tokens[:played], *tokens[played - 1 : played] * drain),
        notes=("the rates the rehearsal's clients drew their Poisson arrivals from",),
    )


def predict_band(
    policy: Policy,
    calibration: Calibration,
    history: History,
    slo: Slo,
    cold_start: float,
    *,
    seeds: int = BAND_SEEDS,
) -> BandPrediction:
    """`history` replayed on `seeds` seeds behind a least-in-flight router, with the measured cold start."""
    measured = replace(policy, cold_start=cold_start)
    model = calibration.model
    cards: list[Scorecard] = []
    timelines: list[Timeline] = []
    for seed in range(seeds):
        run = simulate(
            measured,
            model,
            history,
            slo,
            resolution=TRACE_STEP,
            seed=seed,
            router="least-inflight",
            timeline=True,
        )
        cards.append(outcome(run, model, slo))
        assert run.timeline is not None
        timelines.append(run.timeline)
    return BandPrediction(measured, history, Band.of(cards), tuple(timelines))
