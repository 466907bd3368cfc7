"""The knee's search in open-loop steps: scan, band search, the knee's repeat, one step past saturation.

```
scan: short Poisson steps at fractions of the saturated throughput, rising until one does not hold
  (an undecided one measures on at the deciding length until it is decided)
─► bisection with deciding steps (the window rule of `plan`) between the highest rate that held and
   the lowest that failed, until the band reaches at most `plan.BISECT_TOLERANCE` above the knee,
   each only while the budget still holds the knee's repeat (`reserve`)
─► the knee's rate once more, from idle; if it disagrees with an earlier deciding step, a third,
   longer step decides (a repeat that disagrees with a short scan step is the longer measurement;
   where either ended marginal the rate fails: see below)
─► one short step past saturation: the open-loop throughput, to check the closed-loop one
```

**A rate where the server flips.** A step still undecided at its longest, or one whose statistics
project no decision within it (`plan.extension`), ends *marginal*: its percentile sits within its
own noise of the SLO. The point estimates give its verdict, but no length the budget holds would
decide it, so the search buys none there: a marginal failure is the band's upper end, of two
disagreeing steps at the knee's rate the decided one stands, and where both ended marginal the
rate fails (a third, longer step there would flip the same coin), and what is left goes to deciding steps in
the band below. The reported knee is then a rate that held a deciding step and its repeat, and the band's
upper end is where the server's own verdict turns to chance.

The steps run on a `Bench` (`stepper.Stepper` against a server; a model of one in the tests).
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from lab.load.server import ProfileFailure
from lab.profile import plan
from lab.profile.knee import held, rate_verdicts
from lab.profile.plan import Budget, BudgetExhausted
from lab.profile.schema import Step
from lab.profile.steps import STABLE_SHARE
from lab.profile.twin.model import ModelKnee


class Bench(Protocol):
    """Where the search's steps run, and what it reads of the run so far."""

    steps: list[Step]
    budget: Budget
    reserve: plan.StepPlan | None
    """The knee's repeat, kept back from the budget: an undecided step measures on only beyond it."""

    @property
    def saturated_rate(self) -> float | None: ...

    def lifetime(self, rate: float) -> float: ...

    def throughput(self, step: Step) -> float: ...

    def over(self, rate: float) -> bool: ...

    async def rate(
        self,
        rate: float,
        steps_left: int = 3,
        *,
        deciding: bool = False,
        escalate: bool = False,
        length: float = 1.0,
    ) -> Step: ...

    async def settle(self) -> None: ...

    async def estimate(self) -> float | None: ...

    async def model(self, at: Step | None) -> ModelKnee | None: ...


class KneeSearch:
    """The search on `bench` (see the module docstring)."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench

    async def run(self, saturated: float) -> None:
        """Scan, bisect, repeat the knee, then one step past saturation.

        The scan's rates are fractions of the saturated throughput, or of the throughput at the first
        concurrency that broke the SLO when one did below saturation (the knee lies lower there).
        """
        bench = self.bench
        if await self._modelled(saturated):
            return
        broke = [s for s in bench.steps if s.kind == "concurrency" and not s.slo_met]
        scale = min(saturated, bench.throughput(broke[0])) if broke else saturated
        fractions = list(plan.RATE_FRACTIONS)
        passed: float | None = None
        failed: float | None = None
        await bench.settle()  # the sweep's last level left a standing queue
        near = False
        while failed is None:
            fraction = fractions.pop(0) if fractions else (passed or scale) / scale * plan.BEYOND
            # Once a short step could not decide, the knee is near: a short step above it would hold
            # or fail by the bursts it happened to catch, so every further rate gets a deciding step,
            # except one above the stable share of saturation: it fails by definition, so a deciding
            # step's length there decides nothing and takes budget the band below the knee may lack.
            rate = fraction * scale
            step = await bench.rate(
                rate, steps_left=len(fractions) + 5, escalate=True, deciding=near and not bench.over(rate)
            )
            near = (
                near or step.marginal or (step.window_seconds or 0.0) > self._short_window(step.offered_rate)
            )
            if held(step):
                passed = step.offered_rate
                bench.reserve = self._deciding(passed)
            else:
                failed = step.offered_rate
        for _round in range(3):
            passed = await self._bisect(passed, min(failed, STABLE_SHARE * saturated))
            if await self._confirm(passed):
                break
            # The knee's rate did not hold on the repeat: it is the new upper end, and the band is
            # searched again below it from the highest rate that still holds.
            failed = passed
            below = [
                s.offered_rate for s in rate_verdicts(bench.steps) if held(s) and s.offered_rate < failed
            ]
            passed = max(below) if below else None
        with contextlib.suppress(BudgetExhausted):
            await bench.settle()
            await bench.rate(plan.OVERLOAD_FRACTION * saturated, steps_left=2)

    async def _modelled(self, saturated: float) -> bool:
        """Where the budget left after the sweep cannot hold `plan.OPEN_LOOP_STEPS` deciding steps at
        the model's knee (on its first seed), the knee is the model's (`lab.profile.twin.model`),
        confirmed by one open-loop step at its band's lower end that takes what the budget holds, up
        to `plan.MODEL_LENGTH` scan windows; then the step past saturation if it still fits. Only a
        decided failure there refutes the model (`ModelKnee.checked`): then the budget left goes to
        short steps below it (`_below`), and the knee is what the open-loop steps measured. Whether
        the search ends so."""
        bench = self.bench
        # Whether the budget holds the open-loop steps needs only where the knee is: the model on one
        # seed says so, and its other seeds (the band) are run only where the model is the knee.
        estimate = await bench.estimate()
        if estimate is None:
            return False
        if bench.budget.remaining() >= plan.OPEN_LOOP_STEPS * self._deciding(estimate).duration:
            return False
        guess = await bench.model(None)
        if guess is None:
            return False
        rate = guess.low  # the knee the profile would report: the step must hold there
        await bench.settle()
        short = plan.plan_step(bench.lifetime(rate), rate, plan.RATE_REQUESTS, plan.SCAN_LIFETIMES)
        # the whole budget, less the margin the knee's repeat keeps (the idle wait, the summary) and
        # the shortest scan step below, should the check refute the model (`_below`)
        top = self._below_rates(rate, saturated)[-1:]
        keep = sum(
            plan.plan_step(bench.lifetime(r), r, plan.MIN_RATE_REQUESTS, plan.MIN_LIFETIMES).duration
            for r in top
        )
        room = bench.budget.remaining() / plan.RESERVE_MARGIN - short.settle - keep
        length = min(plan.MODEL_LENGTH, max(1.0, room / short.window))
        step = await bench.rate(rate, steps_left=1, length=length if room >= short.window else 1.0)
        if await bench.model(step) is None:
            await self._below(rate, saturated)
        with contextlib.suppress(BudgetExhausted):
            await bench.settle()
            await bench.rate(plan.OVERLOAD_FRACTION * saturated, steps_left=1)
        return True

    async def _below(self, refuted: float, saturated: float) -> None:
        """After a refuted model: scan steps at the scan's fractions of `saturated` below `refuted`,
        downwards, until one holds (the knee, its band up to `refuted`) or the budget runs out."""
        bench = self.bench
        below = self._below_rates(refuted, saturated)
        with contextlib.suppress(BudgetExhausted):
            for left, rate in enumerate(reversed(below)):
                await bench.settle()
                if held(await bench.rate(rate, steps_left=len(below) - left)):
                    return

    @staticmethod
    def _below_rates(refuted: float, saturated: float) -> list[float]:
        """The scan's rates below a refuted model's `refuted` by more than the band's tolerance, rising."""
        return [
            f * saturated
            for f in plan.RATE_FRACTIONS
            if f * saturated < refuted / (1 + plan.BISECT_TOLERANCE)
        ]

    def _short_window(self, rate: float) -> float:
        """The window of a scan step at `rate` (a step measured longer than this escalated)."""
        lifetime = self.bench.lifetime(rate)
        return plan.plan_step(lifetime, rate, plan.RATE_REQUESTS, plan.SCAN_LIFETIMES).window * 1.001

    def _deciding(self, rate: float) -> plan.StepPlan:
        """The deciding step at `rate` (the window rule at the lifetime expected there)."""
        return plan.deciding_step(self.bench.lifetime(rate), rate)

    async def _bisect(self, passed: float | None, failed: float) -> float:
        """Deciding steps between `passed` and `failed` until the band is narrow, each only while the
        budget still holds the knee's repeat after it (a wider band, said so in the summary, costs
        less than an unrepeated knee); the highest rate held."""
        bench = self.bench
        for _ in range(plan.MAX_BISECTIONS):
            if passed is not None and failed - passed <= plan.BISECT_TOLERANCE * passed * (1 + 1e-9):
                break
            rate = failed / 2 if passed is None else (passed + failed) / 2
            bench.reserve = None if passed is None else self._deciding(passed)
            if passed is not None and not bench.budget.holds(self._deciding(rate), bench.reserve):
                break
            await bench.settle()
            try:
                step = await bench.rate(rate, deciding=True)
            except BudgetExhausted:
                if passed is not None:
                    return passed  # the band stands as wide as measured; the summary says so
                raise
            if held(step):
                passed = rate
            else:
                failed = rate
        if passed is None:
            raise ProfileFailure(
                f"no offered rate held the SLO with a stable queue, down to {failed:.3g} req/s"
            )
        return passed

    async def _confirm(self, rate: float) -> bool:
        """The knee's rate once more, from an idle server, with a deciding step: near the knee a step
        depends on the queue the step before left and on the bursts it caught. If the repeat
        disagrees with an earlier deciding step, a third step twice as long decides (never the luckier
        of the two); one that disagrees with a short scan step is the longer measurement and decides
        alone (`knee.rate_verdicts`), and the budget a third step would take searches the band below
        instead (on a real KV-bound vLLM, 10.2 req/s held an 11 s scan step and failed its 62 s
        repeat; the third step did not fit, and the band below stayed 20 % wide). Where one of the two
        ended marginal, no third step either: the decided one stands; where both did, the rate is
        one where the server flips, and it fails (the module docstring). Whether the rate holds; with no
        budget left for the repeat, the knee stands as found (the summary's repeat check says it was not
        repeated)."""
        bench = self.bench
        earlier = next(s for s in rate_verdicts(bench.steps) if s.offered_rate == rate)
        first = held(earlier)
        scanned = (earlier.window_seconds or 0.0) < self._deciding(rate).window * (1 - 1e-3)
        # If the repeat fails, the knee falls to the highest rate held below: its own repeat stays kept
        # back, so that the repeat measuring on here cannot leave the lower knee unrepeated (on an
        # emulator an undecided repeat at 8.96 req/s measured 3 m 15 s of an 8-minute budget, and
        # 7.47 became the knee on one 14 s scan step).
        below = [s.offered_rate for s in rate_verdicts(bench.steps) if held(s) and s.offered_rate < rate]
        bench.reserve = self._deciding(max(below)) if below else None
        try:
            await bench.settle()
            again = await bench.rate(rate, deciding=True)
            repeat = held(again)
            if repeat != first and not scanned:
                if earlier.marginal and again.marginal:
                    repeat = False  # both undecided at their longest: the server flips at this rate
                elif again.marginal:
                    repeat = first  # a decided step outweighs an undecided one (`knee.rate_verdicts`)
                elif not earlier.marginal:
                    await bench.settle()
                    repeat = held(await bench.rate(rate, deciding=True, length=2.0))
        except BudgetExhausted:
            return True
        return repeat
