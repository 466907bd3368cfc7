"""One policy over recorded traffic: the fleet model, driven by the HPA model (`lab.hpa`) or a baseline.

The HPA is the project's `HorizontalController`, the same code the demo drives: every sync period it
reads the scale (pods existing and Ready) and the metric as the pipeline serves it (the fleet's
state `lag` seconds ago, refreshed every `interval`, averaged over the policy's `smoothing` window),
and its decision creates or removes pods. A metric read from replicas has no value while none is
Ready: the controller gets an error, as from the adapter's 503. Each run of known data
(`History.segments`) is simulated on its own and the outcomes added: a gap is never replayed as
silence.

Without a seed the replay is fluid: the trace's expected arrivals, and the fleet's means read as
the metric. With one (`seed=`), it is one day as a real fleet lives it: whole requests at Poisson
instants, and gauges read as the adapter reads them, counts at the scrape's instant
(`lab.backtest.sampling`); `lab.backtest.band` runs many seeds into a band.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

from lab.backtest.calibration import ServiceModel
from lab.backtest.fleet import Fleet, Router, Tally
from lab.backtest.history import History
from lab.backtest.plans import foresight_knee, foresight_plan
from lab.backtest.policy import FORECAST, Policy
from lab.backtest.reading import Reader, States, forecast, value_of
from lab.backtest.sampling import Draws, Sampler
from lab.hpa import (
    ControllerSettings,
    HorizontalController,
    HPASpec,
    MetricError,
    Scale,
    milli_value,
)
from lab.sizing import KNEE_SHARE
from lab.slo import Slo

# Consecutive scale events in opposite directions closer than this count as one oscillation.
OSCILLATION_SECONDS = 600.0


@dataclass
class Run:
    """One policy's outcome over the whole history, at one capacity."""

    policy: Policy
    capacity: float
    tally: Tally = field(default_factory=Tally)
    arrived: float = 0.0
    waiting_end: float = 0.0
    scale_events: int = 0
    oscillations: int = 0
    peak_replicas: int = 0
    seconds: float = 0.0
    ticks: int = 0
    timeline: Timeline | None = None
    """Per tick, when asked for (`simulate(timeline=True)`): the pods and the served requests' waits."""


@dataclass
class Timeline:
    """A run tick by tick, for pictures of a run over time (one segment's ticks after another's)."""

    dt: float
    pods: list[int] = field(default_factory=list)
    """Pods existing (loading or Ready) during each tick: the replicas paid for."""
    served_at: list[dict[int, float]] = field(default_factory=list)
    """By arrival tick: ticks waited -> requests served (TTFT = unloaded TTFT + ticks x dt)."""


def expand(
    history: History, first: int, end: int, dt: float, model: ServiceModel
) -> tuple[list[float], list[float]]:
    """Arrivals and request cost per tick of `dt` for steps [first, end), each step spread evenly."""
    per = max(1, round(history.step / dt))
    arrivals: list[float] = []
    costs: list[float] = []
    tokens = history.output_tokens
    for i in range(first, end):
        share = history.arrivals[i] / per
        cost = 1.0
        if tokens is not None and not math.isnan(tokens[i]) and tokens[i] > 0:
            cost = tokens[i] / model.output_tokens
        arrivals.extend([share] * per)
        costs.extend([cost] * per)
    return arrivals, costs


def hpa_for(policy: Policy) -> HorizontalController:
    """The HPA object and controller flags of a policy."""
    spec = HPASpec(
        max_replicas=policy.max_replicas,
        metrics=policy.external_metrics(),
        min_replicas=policy.min_replicas,
        behavior=policy.behavior,
    )
    return HorizontalController(
        spec, ControllerSettings(policy.sync_period, policy.tolerance, policy.downscale_stabilization)
    )


def initial_replicas(policy: Policy, capacity: float, arrivals: list[float], dt: float) -> int:
    """Where every autoscaled policy starts: the replicas the first minute's load needs at the knee."""
    if policy.kind == "fixed" and policy.replicas is not None:
        return policy.replicas
    head = arrivals[: max(1, round(60 / dt))]
    rate = sum(head) / (len(head) * dt)
    need = math.ceil(rate / (KNEE_SHARE * capacity)) if rate > 0 else 0
    # At least one: from 1.36 an HPA scales from 0 only a workload it took to 0 itself, so a
    # Deployment starts with a replica and a scale-to-zero policy gets there on its own.
    return min(policy.max_replicas, max(1, policy.min_replicas, need))


def simulate(
    policy: Policy,
    model: ServiceModel,
    history: History,
    slo: Slo,
    *,
    resolution: float = 1.0,
    planned_capacity: float | None = None,
    seed: int | None = None,
    router: Router = "service",
    timeline: bool = False,
) -> Run:
    """Play `history` through `policy` on a fleet of `model` replicas behind `router`.

    Each segment starts with the replicas the history recorded then, or (without a record) those
    the first minute needs at `planned_capacity` (default: the model's): the fleet that existed
    before the window does not depend on the true capacity a run assumes. `seed`: whole requests
    and sampled gauges, drawn from this seed (`None`: the fluid replay)."""
    dt = history.step / max(1, round(history.step / min(resolution, history.step)))
    run = Run(policy, model.capacity)
    if timeline:
        run.timeline = Timeline(dt)
    draws = Draws(seed) if seed is not None else None
    for first, end in history.segments():
        arrivals, costs = expand(history, first, end, dt, model)
        recorded = history.replicas[first] if history.replicas is not None else math.nan
        if policy.kind == "hpa" and not math.isnan(recorded):
            start = min(policy.max_replicas, max(1, policy.min_replicas, round(recorded)))
        else:
            start = initial_replicas(policy, planned_capacity or model.capacity, arrivals, dt)
        if draws is not None:
            arrivals = draws.arrivals(arrivals)
        _segment(run, policy, model, arrivals, costs, dt, slo, start, draws, router)
    return run


def _segment(
    run: Run,
    policy: Policy,
    model: ServiceModel,
    arrivals: list[float],
    costs: list[float],
    dt: float,
    slo: Slo,
    start: int,
    draws: Draws | None = None,
    router: Router = "service",
) -> None:
    if policy.kind in ("foresight", "reactive"):
        plan = foresight_plan(
            policy, foresight_knee(policy, model, slo.tpot), arrivals, dt, ahead=policy.kind == "foresight"
        )
        start = plan[0]
    fleet = Fleet(
        model,
        dt=dt,
        cold_start=policy.cold_start,
        durable=policy.durable,
        slo_ttft=slo.ttft,
        slo_tpot=slo.tpot,
        initial=start,
        router=router,
        whole=draws is not None,
    )
    line = run.timeline
    if line is not None:
        fleet.served_at = [{} for _ in arrivals]
    states = States.sized(len(arrivals))
    sampler = Sampler(draws, len(arrivals)) if draws is not None else None
    reader = Reader(policy, model, states, costs, dt, sampler, router)
    control = _controller(run, policy, model, fleet, reader, arrivals, dt, start, slo)
    sync_ticks = max(1, round(policy.sync_period / dt))
    peak = start
    tick = fleet.tick
    running, waiting, ready = states.running, states.waiting, states.ready
    record = sampler.record if sampler is not None else None
    for k in range(len(arrivals)):
        if k % sync_ticks == 0:
            control(k)
            peak = max(peak, len(fleet.pods))
        tick(k, arrivals[k], costs[k])
        running[k] = fleet.running
        waiting[k] = fleet.waiting
        ready[k] = fleet.ready
        if record is not None:
            record(k, fleet.admitted)
        if line is not None:
            line.pods.append(len(fleet.pods))
    if line is not None and fleet.served_at is not None:
        line.served_at += fleet.served_at
    run.tally.merge(fleet.tally)
    run.arrived += sum(arrivals)
    run.waiting_end += fleet.waiting + fleet.running
    run.peak_replicas = max(run.peak_replicas, peak)
    run.seconds += len(arrivals) * dt
    run.ticks += len(arrivals)


def _controller(
    run: Run,
    policy: Policy,
    model: ServiceModel,
    fleet: Fleet,
    reader: Reader,
    arrivals: list[float],
    dt: float,
    start: int,
    slo: Slo,
) -> Callable[[int], None]:
    """The action taken every sync period: the HPA's sync, the foresight plan, or nothing."""
    events: list[tuple[float, int]] = []

    def rescaled(now: float, old: int, new: int) -> None:
        fleet.scale_to(now, new)
        run.scale_events += 1
        direction = 1 if new > old else -1
        if events and events[-1][1] != direction and now - events[-1][0] <= OSCILLATION_SECONDS:
            run.oscillations += 1
        events.append((now, direction))

    if policy.kind == "fixed":
        return lambda k: None
    if policy.kind in ("foresight", "reactive"):
        plan = foresight_plan(
            policy, foresight_knee(policy, model, slo.tpot), arrivals, dt, ahead=policy.kind == "foresight"
        )

        def foresee(k: int) -> None:
            now, current = k * dt, len(fleet.pods)
            if plan[k] != current:
                rescaled(now, current, plan[k])

        return foresee

    controller = hpa_for(policy)
    lag = round(policy.pipeline.lag / dt)
    every = max(1, round(policy.pipeline.interval / dt))
    desired = start
    arrived = [0.0]
    for a in arrivals:
        arrived.append(arrived[-1] + a)
    metrics = [m.name for m in controller.spec.metrics]

    def value(metric: str, seen: int) -> float | None:
        if seen < 0:
            return value_of(metric, policy, model, 0.0, 0.0, start) if metric != FORECAST else 0.0
        if metric == FORECAST:
            assert policy.forecast is not None
            if reader.states.ready[seen] == 0:
                return None
            return forecast(arrived, seen, dt, policy.forecast.window, policy.forecast.horizon)
        return reader.value(metric, seen, every)

    def sync(k: int) -> None:
        nonlocal desired
        now = k * dt
        ready = bisect_right(fleet.pods, now)
        # The value served now is the state at the last refresh at least `lag` ago (end of tick seen).
        seen = ((k - lag) // every) * every - 1
        values = [value(metric, seen) for metric in metrics]
        readings = [
            MetricError("no ready replica reports the metric") if v is None else milli_value(v)
            for v in values
        ]
        result = controller.sync(now, Scale(desired, len(fleet.pods), ready), readings)
        if result.rescale:
            rescaled(now, desired, result.desired_replicas)
            desired = result.desired_replicas

    return sync
