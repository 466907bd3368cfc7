"""The knee's search (`lab.profile.search`) on a bench whose steps take no time and whose budget is
spent by hand: what it measures is the order and the budget it keeps back, not a server (the
emulator profiles in tests/integration/test_profile_emulators.py measure whole runs)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from lab.profile import plan
from lab.profile.checks import completed
from lab.profile.knee import knee_step
from lab.profile.schema import Step, load
from lab.profile.search import KneeSearch
from lab.profile.stepper import lifetime
from lab.profile.steps import over_stable_share
from lab.profile.twin.model import ModelKnee
from tests.lab.profile.builders import step

LIFETIME = 1.0
# The deciding step at 10 req/s and a 1 s lifetime: max(60 lifetimes, 400 requests / 10) = 60 s
# plus 6 s of settling.
DECIDING = plan.deciding_step(LIFETIME, 10.0).duration


class Budget(plan.Budget):
    """Server seconds left, spent by hand."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.left = seconds

    def remaining(self) -> float:
        return self.left


class Instant:
    """A bench (`search.Bench`) whose rates hold below `knee` (a short scan step: below `scan_knee`,
    as high or higher); each step spends its plan of the budget, a deciding one the window rule's.
    In `flips` the server flips a coin: a deciding or escalated step there (a scan step only from
    `scan_knee` up) stays undecided, its statistics projecting a decision after `needed` seconds,
    and measures on as `plan.extension` lets it; it ends marginal, held below `knee`."""

    def __init__(
        self,
        knee: float,
        budget: float,
        scan_knee: float | None = None,
        flips: tuple[float, float] = (math.inf, math.inf),
        needed: float = math.inf,
    ) -> None:
        self.steps: list[Step] = []
        self.spent = Budget(budget)
        self.budget: plan.Budget = self.spent
        self.reserve: plan.StepPlan | None = None
        self.saturated_rate: float | None = None
        self.knee = knee
        self.scan_knee = knee if scan_knee is None else scan_knee
        self.flips, self.needed = flips, needed
        self.marginal_above = math.inf
        self.measured: list[float] = []
        self.modelled: list[Step | None] = []
        self.estimated = 0
        self.model_knee = knee
        self.checked: ModelKnee | None = None
        self.deciding: list[bool] = []
        self.search = KneeSearch(self)

    def lifetime(self, rate: float) -> float:
        return LIFETIME

    def throughput(self, step: Step) -> float:
        return step.achieved_rate

    def over(self, rate: float) -> bool:
        return over_stable_share(rate, self.saturated_rate)

    async def settle(self) -> None:
        return None

    async def estimate(self) -> float | None:
        """The model's knee on one seed: `model_knee` itself."""
        self.estimated += 1
        return self.model_knee

    async def model(self, at: Step | None) -> ModelKnee | None:
        """A model whose knee is `model_knee` (the server's deciding `knee` unless set), ±2 %, checked
        by the step `at` as the stepper checks it (`ModelKnee.checked`)."""
        self.modelled.append(at)
        guess = ModelKnee(self.model_knee, 0.98 * self.model_knee, 1.02 * self.model_knee)
        if at is None:
            return guess
        self.checked = guess.checked(at)
        return None if self.checked.check == "refuted" else self.checked

    async def rate(
        self,
        rate: float,
        steps_left: int = 3,
        *,
        deciding: bool = False,
        escalate: bool = False,
        length: float = 1.0,
    ) -> Step:
        self.deciding.append(deciding)
        # Sized as `Stepper.step` sizes it, and measured on as it measures on.
        sized = plan.size(
            self.budget, "rate", rate, self.lifetime(rate), steps_left, deciding=deciding, length=length
        )
        window, marginal = sized.window, rate > self.marginal_above
        holds = rate < (self.knee if deciding else self.scan_knee)
        if self.flips[0] <= rate < self.flips[1] and (deciding or (escalate and not holds)):
            unit = plan.deciding_step(self.lifetime(rate), rate).window
            limit = (1 + plan.DECIDE_EXTENSIONS) * unit
            left = self.budget.beyond(self.reserve) - sized.duration
            while (grow := plan.extension(window, unit, limit, left, self.needed)) is not None:
                window, left = window + grow, left - grow
            holds, marginal = rate < self.knee, True
        self.spent.left -= sized.settle + window
        self.measured.append(rate)
        made = dataclasses.replace(step(rate, held=holds), marginal=marginal, window_seconds=window)
        self.steps.append(made)
        return made


def search(profiler: Instant, passed: float, failed: float) -> float:
    """The band's search and the repeat, as `run` runs them after a scan that bracketed the knee."""
    profiler.steps.append(step(passed, held=True))

    async def run() -> float:
        knee = await profiler.search._bisect(passed, failed)
        await profiler.search._confirm(knee)
        return knee

    return asyncio.run(run())


def test_the_band_is_searched_only_while_the_knees_repeat_still_fits() -> None:
    """Room for two deciding steps and a margin: one bisection, then the repeat of the highest rate
    that held, not three bisections that leave no time to repeat it."""
    profiler = Instant(knee=9.5, budget=2.5 * DECIDING)
    knee = search(profiler, 8.0, 10.0)
    assert profiler.measured == [9.0, 9.0], "one bisection (9 held), then 9 repeated"
    assert knee == 9.0


def test_with_room_the_band_narrows_to_its_tolerance_and_the_knee_is_repeated() -> None:
    profiler = Instant(knee=9.5, budget=20 * DECIDING)
    knee = search(profiler, 8.0, 10.0)
    assert profiler.measured[:3] == [9.0, 9.5, 9.25] and profiler.measured[-1] == knee == 9.25


def test_a_rate_above_the_stable_share_gets_a_scan_step_even_near_the_knee() -> None:
    """Once a scan step ends undecided the knee is near and further rates get deciding steps, but not
    one above `STABLE_SHARE` of saturation: it fails by definition (on a real KV-bound vLLM a
    deciding step there took 56 s of a 9-minute budget that the band below the knee then lacked)."""
    profiler = Instant(knee=9.2, budget=20 * DECIDING)
    profiler.saturated_rate = 10.0
    profiler.marginal_above = 8.0  # the scan step at 9 req/s ends undecided: the knee is near
    asyncio.run(profiler.search.run(10.0))
    scan = dict(zip(profiler.measured[:6], profiler.deciding[:6], strict=True))
    assert scan == {3.0: False, 4.5: False, 6.0: False, 7.5: False, 9.0: False, 10.5: False}, scan
    assert profiler.measured[6:] == [9.25, 9.0, 11.0], "[9, 9.5) bisected once, 9 repeated, then overload"
    assert profiler.deciding[6:] == [True, True, False]


def _confirmed(earlier_window: float) -> tuple[bool, list[float]]:
    """`_confirm(8)` after 8 req/s held a step of `earlier_window` seconds, on a server whose knee
    lies below 8: whether 8 held, and the rates the repeat measured."""
    profiler = Instant(knee=7.5, budget=20 * DECIDING)
    profiler.steps.append(dataclasses.replace(step(8.0, held=True), window_seconds=earlier_window))
    held = asyncio.run(profiler.search._confirm(8.0))
    return held, profiler.measured


def test_a_repeat_that_disagrees_with_a_scan_step_decides_alone() -> None:
    """The knee's rate held a short scan step and fails its deciding repeat: the repeat is the longer
    measurement and decides (`rate_verdicts`); no third step, whose budget searches the band below."""
    held, repeats = _confirmed(earlier_window=10.0)
    assert not held and repeats == [8.0]


def test_a_repeat_that_disagrees_with_a_deciding_step_gets_a_third_twice_as_long() -> None:
    window = plan.deciding_step(LIFETIME, 8.0).window
    held, repeats = _confirmed(earlier_window=window)
    assert not held and repeats == [8.0, 8.0]


class Replay(Instant):
    """`Instant` on the concurrency sweep of a real profile: its lifetimes size the steps, and its
    throughputs (at the profile's own output length) set the scan's scale, as on the run."""

    def __init__(self, recorded: Path, budget: float, knee: float, scan_knee: float, **flips: Any) -> None:
        super().__init__(knee, budget, scan_knee, **flips)
        found = load(recorded)
        first_rate = next(i for i, s in enumerate(found.steps) if s.kind == "rate")
        self.steps.extend(found.steps[:first_rate])  # the sweep (the last closed-loop step came after)
        self.saturated_rate = found.saturated_rate
        self.output_tokens = found.workload.output_tokens.mean
        self.sweep_steps = len(self.steps)

    def lifetime(self, rate: float) -> float:
        return lifetime(self.steps, rate)

    def throughput(self, step: Step) -> float:
        return completed(step, self.output_tokens)


GPU_PROFILES = Path(__file__).parents[3] / "runs/2026-11-26-real-vllm-0.26.0-h200/gpu-bound-8b"
KV_BOUND_RUN2 = GPU_PROFILES / "kv-bound/run2-seed0-profile.json"
BATCH_BOUND_RUN2 = GPU_PROFILES / "batch-bound/run2-seed0-profile.json"


@pytest.mark.parametrize(
    ("budget", "knee", "after"),
    [
        (450.0, 9.82, [10.54, 10.25, 9.39, 9.82, 9.82, 12.54]),
        (390.0, 9.39, [10.54, 10.25, 9.39, 9.39, 12.54]),
    ],
)
def test_a_knee_that_fails_its_repeat_leaves_budget_for_the_band_below(
    budget: float, knee: float, after: list[float]
) -> None:
    """The real KV-bound vLLM's run 2 (docs/benchmarks.md), replayed on its own sweep, whose lifetimes size
    the steps as they did there (29, 20, 15, 12 and 10 s scan steps, a 62 s repeat): the scan's 0.9 of
    saturation held a 10 s step, its deciding repeat failed, and the knee fell to the scan step below, 20 %
    lower. Here short steps hold up to 10.4 req/s and deciding ones below 10, with the 450 s a 10-minute
    budget leaves after the warm-up, sweep and probe (~140 s on that run), or 60 s less. The scan's 1.05 of
    saturation (failed by definition) is sized by the lifetime of the last level without a standing queue (16
    clients, 1.28 s: 13 s), not by the 5.6 s of the sweep's 64 clients (56 s); the repeat's failure decides
    alone; the band below is bisected. The code before read 8.55 at any budget from 390 to 510 s: a third step
    at 10.26, twice 62 s, took what the band below needed."""
    profiler = Replay(KV_BOUND_RUN2, budget=budget, knee=10.0, scan_knee=10.4)
    saturated = profiler.saturated_rate
    assert saturated is not None
    asyncio.run(profiler.search.run(saturated))
    measured = [round(r, 2) for r in profiler.measured]
    assert measured[:6] == [3.42, 5.12, 6.83, 8.54, 10.25, 11.96], "the scan, at the rates the run sent"
    assert measured[6:] == after
    windows = [s.window_seconds for s in profiler.steps[profiler.sweep_steps :]]
    assert windows[5] == pytest.approx(12.8, abs=0.1), "1.05 of saturation: ten lifetimes of 16 clients'"
    found = knee_step(profiler.steps)
    assert found is not None and round(found.offered_rate, 2) == knee


def test_the_lifetime_near_the_knee_is_read_off_the_levels_without_a_queue() -> None:
    """On the real batch-bound vLLM's sweep (16 clients 1.04 s, 32 clients 1.5 s, 64 clients with 29
    waiting 3.0 s), the lifetime at 19.2 req/s is what its open-loop steps measured there (1.30 and
    1.39 s), not the 2.3 s of the line through the 64 clients' queue; past the last level without
    a queue, that level's."""
    profiler = Replay(BATCH_BOUND_RUN2, budget=600.0, knee=20.0, scan_knee=20.0)
    at_knee = [s.e2e_seconds["p50"] for s in load(BATCH_BOUND_RUN2).steps if round(s.offered_rate, 1) == 19.2]
    assert [round(e2e, 2) for e2e in at_knee] == [1.3, 1.39]
    assert profiler.lifetime(19.2) == pytest.approx(1.29, abs=0.02)
    assert profiler.lifetime(30.0) == pytest.approx(1.5, abs=0.01)


@pytest.mark.parametrize("budget", [390.0, 450.0])
def test_the_batch_bound_replay_repeats_its_knee_with_shorter_deciding_steps(budget: float) -> None:
    """The real batch-bound vLLM's run 2 replayed like the KV-bound one (short steps hold up to 20.5
    req/s, deciding ones below 19.8): the band [19.2, 20.2) is bisected once and the knee repeated,
    each deciding step 80 s (60 lifetimes of 1.33 s); with the 2.3 s lifetime the 64 clients' queue
    lent the line, the code before spent 138 s on one and, at 390 s, left 19.2 the knee."""
    profiler = Replay(BATCH_BOUND_RUN2, budget, 19.8, 20.5)
    saturated = profiler.saturated_rate
    assert saturated is not None
    asyncio.run(profiler.search.run(saturated))
    rates = [round(r, 2) for r in profiler.measured[4:]]
    assert rates == [19.2, 22.4, 19.74, 19.74, 23.48], "the scan at the rates the run sent, then the band"
    windows = [
        s.window_seconds or 0.0 for s in profiler.steps[profiler.sweep_steps + 6 : profiler.sweep_steps + 8]
    ]
    assert windows == pytest.approx([80.0, 80.0], abs=1.0)
    found = knee_step(profiler.steps)
    assert found is not None and round(found.offered_rate, 2) == 19.74


KV_BOUND_RUN3 = {seed: GPU_PROFILES / f"kv-bound/run3-seed{seed}-profile.json" for seed in (0, 1)}


def _run3_replay(seed: int, budget: float) -> Replay:
    """The KV-bound pair of run 3 (docs/benchmarks.md; code 3efd95a) replayed on each run's own sweep,
    with one server for both, read off their deciding steps: below 9.9 req/s a deciding step holds;
    in [9.9, 10.8) the server flips (seed 1's 9.96 held marginal, then held; seed 0's 10.69 and 10.40
    and seed 1's 10.39 failed marginal at 131-208 s), its point estimates holding below 10.0, its
    statistics projecting a decision only past the longest step (seed 0's 10.69 at 208 s: TTFT miss
    share 0.19 [0.08, 0.30] against 0.10, so 208 s x (0.11 / 0.09)^2 = 316 s of the 198 s allowed;
    seed 1's 10.39: 600 s). Short scan steps held 10.40 on seed 0 and left 10.39 undecided on seed 1."""
    profiler = Replay(
        KV_BOUND_RUN3[seed],
        budget,
        knee=10.0,
        scan_knee=(10.45, 10.0)[seed],
        flips=(9.9, 10.8),
        needed=(316.0, 600.0)[seed],
    )
    saturated = profiler.saturated_rate
    assert saturated is not None
    asyncio.run(profiler.search.run(saturated))
    return profiler


@pytest.mark.parametrize("budget", [390.0, 450.0])
def test_where_the_server_flips_the_search_buys_no_length_and_bisects_below(budget: float) -> None:
    """Seed 0 of run 3 read 8.67 req/s (-17 % against the sweep's 10.5): its deciding steps at 10.69
    and 10.40 ended marginal after 208 and 131 s and left no budget for [8.67, 10.4). Replayed, each
    flip stops after one deciding window (its statistics project no decision within the longest
    step), fails as the band's upper end, and the band below is bisected; the reported knee held a
    deciding step and its repeat, and the band reaches at most 10 % above it (±5 %)."""
    profiler = _run3_replay(0, budget)
    rates = [round(r, 2) for r in profiler.measured]
    assert rates[:6] == [3.47, 5.2, 6.94, 8.67, 10.4, 12.14], "the scan, at the rates the run sent"
    flips = [s for s in profiler.steps[profiler.sweep_steps :] if s.marginal and s.offered_rate > 10.0]
    assert [round(s.offered_rate, 2) for s in flips] == [10.69, 10.4]
    unit = plan.deciding_step(profiler.lifetime(10.5), 10.5).window
    assert all((s.window_seconds or 0.0) < 1.1 * unit for s in flips), "one deciding window each, not three"
    found = knee_step(profiler.steps)
    assert found is not None and found.offered_rate > 9.4
    decided = [s for s in profiler.steps if s.offered_rate == found.offered_rate and s.window_seconds]
    assert len(decided) == 2 and all(
        (s.window_seconds or 0.0)
        >= 0.99 * plan.deciding_step(profiler.lifetime(found.offered_rate), found.offered_rate).window
        for s in decided
    ), "a deciding step and its repeat"
    failed = min(s.offered_rate for s in profiler.steps[profiler.sweep_steps :] if not s.slo_met)
    assert failed <= 1.1 * found.offered_rate


@pytest.mark.parametrize("budget", [390.0, 450.0])
def test_the_two_seeds_of_run_3_replay_to_knees_within_ten_percent(budget: float) -> None:
    """The runs read 8.67 and 9.96 (13 % apart); their replays agree within 10 %, each repeated."""
    knees = []
    for seed in (0, 1):
        found = knee_step(_run3_replay(seed, budget).steps)
        assert found is not None
        knees.append(found.offered_rate)
    assert max(knees) <= 1.1 * min(knees), knees


def test_a_repeat_that_measures_on_keeps_the_repeat_of_the_rate_below() -> None:
    """The knee's rate (9, held on a short scan step) flips on its repeat and could measure on; the
    highest rate held below (8) becomes the knee if it fails, so the repeat at 9 measures on only
    beyond 8's own repeat, which the budget still holds afterwards."""
    below = plan.deciding_step(LIFETIME, 8.0)
    repeat = plan.deciding_step(LIFETIME, 9.0)
    profiler = Instant(
        knee=8.5,
        budget=repeat.duration + plan.RESERVE_MARGIN * below.duration + 50.0,
        flips=(8.8, 9.5),
        needed=170.0,
    )
    profiler.steps += [
        dataclasses.replace(step(8.0, held=True), window_seconds=below.window),
        dataclasses.replace(step(9.0, held=True), window_seconds=10.0),
    ]
    assert not asyncio.run(profiler.search._confirm(9.0))
    assert profiler.steps[-1].marginal and profiler.steps[-1].window_seconds == repeat.window
    assert profiler.spent.left >= plan.RESERVE_MARGIN * below.duration


def test_a_marginal_repeat_does_not_overturn_a_decided_step() -> None:
    """The knee's rate held a decided deciding step; its repeat flips and ends marginal: the decided
    step stands, with no third step (on a CI emulator 2.31 req/s held 173 s and its repeat's queue
    trend projected a decision only after ~30 minutes)."""
    profiler = Instant(knee=2.2, budget=20 * DECIDING, flips=(2.25, 2.4), needed=math.inf)
    window = plan.deciding_step(LIFETIME, 2.31).window
    profiler.steps += [
        dataclasses.replace(step(2.31, held=True), window_seconds=window),
        dataclasses.replace(step(2.4, held=False), window_seconds=window),
    ]
    assert asyncio.run(profiler.search._confirm(2.31))
    assert profiler.measured == [2.31] and profiler.steps[-1].marginal
    found = knee_step(profiler.steps)
    assert found is not None and found.offered_rate == 2.31


def test_where_the_budget_holds_too_few_deciding_steps_the_knee_is_the_models_scaled_to_one_step() -> None:
    """Six-second lifetimes: a deciding step at the model's knee (0.85 req/s) is 60 lifetimes, and
    the 300 s left after the sweep hold none of the four a scan, a bisection and a repeat take. No
    scan: one open-loop step at the model's knee takes what the budget holds (up to three scan
    windows) at the band's lower end, the knee reported, and the step past saturation follows if it
    fits."""
    profiler = Instant(knee=0.85, budget=300.0)
    profiler.lifetime = lambda rate: 6.0  # type: ignore[method-assign]
    profiler.saturated_rate = 1.36
    asyncio.run(profiler.search.run(1.36))
    assert profiler.modelled[0] is None and profiler.modelled[1] is profiler.steps[0]
    assert profiler.measured[0] == pytest.approx(0.98 * 0.85), "the band's lower end"
    short = plan.plan_step(6.0, 0.85, plan.RATE_REQUESTS, plan.SCAN_LIFETIMES)
    assert short.window < (profiler.steps[0].window_seconds or 0.0) <= plan.MODEL_LENGTH * short.window
    assert profiler.spent.left >= 0


def test_with_room_for_the_open_loop_the_model_only_guesses() -> None:
    """The same server with a budget that holds four deciding steps at the model's knee: the scan
    and the bisection measure the knee; only the model's one-seed estimate is asked (the band of its
    seeds is never computed) and it is never scaled."""
    profiler = Instant(knee=9.5, budget=4.5 * DECIDING)
    profiler.saturated_rate = 12.0
    asyncio.run(profiler.search.run(12.0))
    assert profiler.estimated == 1 and profiler.modelled == []
    assert profiler.measured[:2] == pytest.approx([3.6, 5.4]), "the scan"


def six_seconds(knee: float, model: float) -> Instant:
    """The six-second engine after its sweep (300 s left, saturated at 1.36), its model's knee `model`."""
    profiler = Instant(knee=knee, budget=300.0)
    profiler.model_knee = model
    profiler.lifetime = lambda rate: 6.0  # type: ignore[method-assign]
    profiler.saturated_rate = 1.36
    return profiler


def test_a_marginal_check_does_not_refute_the_model() -> None:
    """Seed 1 of the six-second engine: the server flips at the model's lower end, so the check ends
    marginal and fails by its point estimates; the model stands, and no step is spent below it."""
    profiler = six_seconds(knee=0.8, model=0.85)
    profiler.marginal_above = 0.8
    asyncio.run(profiler.search.run(1.36))
    check = profiler.steps[0]
    assert check.marginal and not check.slo_met
    assert profiler.checked is not None and profiler.checked.check == "marginal"
    assert profiler.measured == pytest.approx([0.98 * 0.85, 1.1 * 1.36]), "the check, then past saturation"


def test_a_refuted_model_gives_way_to_the_open_loop_steps_below_it() -> None:
    """The model's lower end fails, decided: the budget left goes to scan steps below it, downwards
    from the highest scan fraction under it, until one holds; that rate is the knee, its band up to
    the refuted rate."""
    profiler = six_seconds(knee=0.7, model=0.85)
    asyncio.run(profiler.search.run(1.36))
    assert profiler.measured[:2] == pytest.approx([0.98 * 0.85, 0.45 * 1.36]), "the check, then 0.612"
    found = knee_step(profiler.steps)
    assert found is not None and found.offered_rate == pytest.approx(0.45 * 1.36)
    assert profiler.spent.left >= 0
