"""The demo's default policy: what the decision lab recommends for the demo's day and SLO.

`backtest_day` runs the backtest's own machinery (`lab.backtest.runner.evaluate`, the built-in sweep
with its baselines, the anticipating policy with headroom, `lab.backtest.decision`) on the run's day
and engine (`lab.demo.decision.day`), each policy on the decision's ten seeds (the HPA reading samples); the
recommendation is the cheapest policy supported on every seed, as `vllm-autoscale backtest` chooses
for a user's traffic. `apply` makes it the run's HPA unless `--metric` chose one. The same backtest
gives the summary its comparison (`lab.demo.decision.comparison`). About 10 s of CPU, spread over up to four
processes, no clock.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from lab.backtest.decision import Decision, Judged, Rules
from lab.backtest.headroom import with_headroom
from lab.backtest.policy import Pipeline, SweepSettings, builtin_sweep
from lab.backtest.runner import Backtest, evaluate
from lab.demo.decision.comparison import Comparison, row
from lab.demo.decision.day import demo_day, engine_calibration
from lab.demo.settings import DIRECT_METRIC, DemoSettings
from lab.results_cache import cached

#: The baselines the summary sets the recommendation beside, by their backtest names.
FORESIGHT, UTILISATION, FIXED_PEAK = "foresight", "gpu-util-80", "fixed-peak"


@dataclass(frozen=True)
class DayBacktest:
    """The decision for the run's day, and the policy it recommends (`None` if none is supported)."""

    decision: Decision
    recommended: Judged | None

    def judged(self, name: str) -> Judged:
        """The policy called `name` (a baseline or the recommendation)."""
        return next(j for j in self.decision.judged if j.policy.name == name)


def backtest_day(settings: DemoSettings, capacity: float) -> DayBacktest:
    """Backtest the run's day with every built-in policy (and the anticipating one with headroom),
    in the run's cluster: its cold start, sync period, replica range and metric pipeline. A day
    backtested before with the same inputs and code is read back (`lab.results_cache`)."""
    inputs = (
        settings.profile,
        capacity,
        settings.seed,
        settings.params,
        settings.slo,
        settings.minimum,
        settings.max_replicas,
        settings.load_delay,
        settings.scrape_interval,
        settings.sync_period,
    )
    return cached("demo-days", inputs, lambda: _backtest_day(settings, capacity))


def _backtest_day(settings: DemoSettings, capacity: float) -> DayBacktest:
    slo = settings.slo
    rules = Rules()
    history = demo_day(settings.profile, capacity, settings.seed)
    cal = engine_calibration(settings.params, capacity, slo, rules.slo_attainment)
    knee, _ = cal.knee_rate(slo.tpot)
    sweep = SweepSettings(
        min_replicas=settings.minimum,
        max_replicas=settings.max_replicas,
        cold_start=settings.load_delay,
        # The demo's adapter scrapes every `scrape_interval`; the HPA reads the value one scrape old.
        pipeline=Pipeline(settings.scrape_interval, settings.scrape_interval),
        sync_period=settings.sync_period,
        knee_rate=knee,
    )
    policies = with_headroom(builtin_sweep(cal.model, sweep, history.peak_rate(), cal.saturation))
    # Replays are independent: a laptop's cores cut the demo's wait before its first request.
    jobs = min(4, os.cpu_count() or 1)
    backtest = Backtest(history, cal, policies, Path(), slo=slo, rules=rules, jobs=jobs)
    decision = evaluate(backtest)
    return DayBacktest(decision, decision.recommended)


def apply(settings: DemoSettings, choice: Judged) -> DemoSettings:
    """`settings` with the recommended policy as its HPA, where the flags left it open: the metric
    and target (with its guard), the replica range and the scale-down window. A fixed fleet is an HPA
    whose minimum is its maximum."""
    policy = choice.policy
    window = policy.downscale_stabilization
    if policy.behavior is not None and policy.behavior.scale_down is not None:
        window = float(policy.behavior.scale_down.stabilization_window_seconds or window)
    if policy.kind == "fixed" and policy.replicas is not None:
        return dataclasses.replace(
            settings,
            metric=DIRECT_METRIC,
            min_replicas=policy.replicas,
            max_replicas=policy.replicas,
            policy=policy.name,
        )
    return dataclasses.replace(
        settings,
        metric=policy.metric,
        target_type=policy.target_type,
        target=settings.target if settings.target is not None else policy.target,
        guard=None if policy.guard is None else policy.guard.target,
        min_replicas=settings.min_replicas if settings.min_replicas is not None else policy.min_replicas,
        downscale_stabilization=settings.downscale_stabilization or window,
        policy=policy.name,
    )


def comparison(day: DayBacktest) -> Comparison:
    """The summary's rows: the recommendation, foresight, the utilisation HPA and the fixed peak fleet."""
    best = day.recommended
    bound = day.judged(FORESIGHT)
    knee = bound.policy.knee_rate or 0.0
    return Comparison(
        foresight=row(
            "foresight",
            bound,
            f"the least any policy spends: knows the traffic, {knee:.3g} req/s per replica",
        ),
        baselines=(
            row("utilisation HPA", day.judged(UTILISATION)),
            row("fixed peak fleet", day.judged(FIXED_PEAK)),
        ),
        recommended=None
        if best is None
        else row("recommended", best, f"{best.policy.name}, the backtest's choice"),
    )
