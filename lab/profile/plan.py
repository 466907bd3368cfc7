"""How long each step runs, and the rates the profile tries, within the time budget.

A step lasts a settling time (old requests leave, the queue finds its level) and a measured window.
Two kinds of window, by what the step has to decide:

* **Scan and closed-loop steps** locate things far from the knee (the batch curve, the region where
  rates start to fail): `LIFETIMES` request lifetimes and `*_REQUESTS` requests, whichever is longer.
  When the budget cannot hold the steps still planned, they shrink to their share, never below
  `MIN_LIFETIMES` lifetimes and the fewest requests.
* **Deciding steps** settle the knee, and their length is set by what decides a verdict there (the
  window rule): `DECIDE_LIFETIMES` request lifetimes, so that the bursts of a many-slot engine
  average out and a queue growing by a few percent of the arrivals climbs above the gauge's noise,
  and at least `DECIDE_REQUESTS` requests, so that each of the verdict's blocks holds ~50 (a block's
  90th percentile is then an order statistic, not an interpolation); a window whose intervals are
  still wide measures on. On vLLM 0.26.0 with 32 slots the lifetimes decide: ~22 s at 45 req/s (tens
  of seconds, where the old rule gave 2.5-6 s, and a 600-request rule ~13 s, in which the same rate
  held, failed and held again on one server). A deciding step whose
  verdict is still undecided measures on, one window at a time, up to `DECIDE_EXTENSIONS` more; it
  never shrinks, and one that does not fit the budget ends the profile.

What a default profile of a real engine spends (10 minutes of budget): ~1 minute of warm-up, probe
and closed-loop sweep, under a minute of short scan steps, then 4-6 deciding steps of 30-90 s, the
repeat of the knee from idle among them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from lab.virtual_time import loop_time

LIFETIMES: Final = 6.0
#: a scan step measures this many lifetimes at least (closed-loop steps take `LIFETIMES`)
SCAN_LIFETIMES: Final = 10.0
SETTLE_LIFETIMES: Final = 1.5
#: requests per measured window (open loop: a scan step), and the fewest a shrunk window may hold
RATE_REQUESTS: Final = 100
MIN_RATE_REQUESTS: Final = 30
#: the same for closed-loop steps, where one client alone sends one request per lifetime
CONCURRENCY_REQUESTS: Final = 10
MIN_CONCURRENCY_REQUESTS: Final = 6
#: a closed-loop level's window holds `LIFETIMES` lifetimes of requests up to this many output
#: tokens, and this many decode steps of longer ones, but never fewer than `MIN_CLOSED_LIFETIMES`
#: lifetimes (see `closed_share`)
CLOSED_DECODE_STEPS: Final = LIFETIMES * 128
MIN_CLOSED_LIFETIMES: Final = 2.0
#: a closed-loop level of long requests settles for its share of `SETTLE_LIFETIMES` but at least one
#: lifetime: by then every request running was sent within the level
MIN_CLOSED_SETTLE_LIFETIMES: Final = 1.0
MIN_LIFETIMES: Final = 3.0
#: the deciding window (see the module docstring), and how many more windows an undecided step may add
DECIDE_REQUESTS: Final = 400
DECIDE_LIFETIMES: Final = 60.0
DECIDE_EXTENSIONS: Final = 2
#: a deciding step settles for this share of its window at least: near the knee the queue takes
#: several seconds to find its level after a change of rate
DECIDE_SETTLE_SHARE: Final = 0.1
#: scan rates, as fractions of the saturated throughput the concurrency sweep measured: spread over
#: the range where knees lie (an SLO-bound knee sits at 30-60 % of it on real engines, a queue-bound
#: one near the top); no rate above `steps.STABLE_SHARE` of it holds
RATE_FRACTIONS: Final = (0.3, 0.45, 0.6, 0.75, 0.9, 1.05)
#: the factor between further rates when the last fraction still held (the sweep did not saturate)
BEYOND: Final = 1.15
#: bisect between the highest rate that held and the lowest that failed while the band reaches more
#: than this share above the rate that held (±2.5 % about its middle, as the summary writes it) and
#: the budget holds another deciding step beside the knee's repeat; a deciding step measures each
#: midpoint
BISECT_TOLERANCE: Final = 0.05
MAX_BISECTIONS: Final = 6
#: after the knee, one short open-loop step at this multiple of the saturated throughput: what the
#: server completes with a backlog, to check against the closed-loop figure
OVERLOAD_FRACTION: Final = 1.1
#: the knee is the model's (`lab.profile.twin.model`) where the budget after the sweep holds fewer deciding
#: steps than a scan, a bisection and the knee's repeat take; its open-loop step measures up to this
#: many scan windows
OPEN_LOOP_STEPS: Final = 4
MODEL_LENGTH: Final = 3.0
#: the concurrency sweep doubles its clients up to this many
MAX_CLIENTS: Final = 4096
#: rounds of the prefill probe that are fitted (each sends every burst size once), after one round that is not
PREFILL_ROUNDS: Final = 6
#: the prefill probe's burst sizes (requests of the workload's prompt sent at once), as far as the
#: server's slots and KV cache hold them (`prefill.burst_sizes`)
PREFILL_BURSTS: Final = (1, 2, 4, 8)


#: the knee's repeat is kept back from the budget with this margin over its step (the idle wait
#: before it and the summary after are not part of a step's plan)
RESERVE_MARGIN: Final = 1.15


class BudgetExhausted(Exception):
    """The time budget cannot hold another step."""


@dataclass(frozen=True)
class StepPlan:
    """Settling time and measured window of one step, in the server's seconds."""

    settle: float
    window: float

    @property
    def duration(self) -> float:
        return self.settle + self.window


def plan_step(e2e: float, rate: float, requests: float, lifetimes: float = LIFETIMES) -> StepPlan:
    """The step a request lifetime of `e2e` and an expected completion `rate` call for."""
    return StepPlan(SETTLE_LIFETIMES * e2e, max(lifetimes * e2e, requests / rate))


def closed_share(output_tokens: float) -> float:
    """The share of a closed-loop level's planned window that requests of `output_tokens` need.

    What a level measures is the engine at that batch: TPOT and the tokens it completes a second,
    each an average over every decode step of the window, and whether a queue stands. Their noise
    falls with the decode steps observed, not with the requests finished: a window of `LIFETIMES`
    lifetimes of 128-token requests sees ~770 steps, and 2,048-token requests see as many in under
    half a lifetime. So the window counts decode steps (`CLOSED_DECODE_STEPS`), with a floor of
    `MIN_CLOSED_LIFETIMES` lifetimes for the clients' phases to mix; requests of up to 128 tokens
    keep the lifetimes the levels were calibrated with; the settling shrinks by the same share, to one
    lifetime at least (`MIN_CLOSED_SETTLE_LIFETIMES`). Without it a sweep of 2,048-token requests
    (11 s lifetimes) took 80-100 s a level and the whole 10-minute budget of an emulated 8B engine."""
    return min(
        1.0,
        max(MIN_CLOSED_LIFETIMES / LIFETIMES, CLOSED_DECODE_STEPS / (LIFETIMES * max(1.0, output_tokens))),
    )


def deciding_step(e2e: float, rate: float) -> StepPlan:
    """The window rule: the step that decides a verdict at `rate` (see the module docstring)."""
    window = max(DECIDE_LIFETIMES * e2e, DECIDE_REQUESTS / rate)
    return StepPlan(max(SETTLE_LIFETIMES * e2e, DECIDE_SETTLE_SHARE * window), window)


def extension(
    measured: float, unit: float, limit: float, remaining: float, needed: float = 0.0
) -> float | None:
    """How much longer an undecided step measures: up to one deciding window (`unit`) for a short
    scan step, then a unit at a time while the window stays within `limit` and the budget; `None`
    when it may not grow. From a full deciding window on, a step also stops where the window its
    statistics project to decide (`needed`, `verdict.growth_to_decide` times `measured`) lies beyond
    `limit`: the server flips a coin at that rate, and the length the step would buy is worth more
    to the band below (on a real KV-bound vLLM, 10.69 and 10.40 req/s each measured on to 208 s and
    131 s, ended undecided, and left no budget for the band below). Relative tolerances: `measured`
    is a difference of clock readings, and a window a rounding error short of a unit must grow by a
    unit, not by the rounding error."""
    short = measured < unit * (1 - 1e-3)
    grow = unit - measured if short else unit
    if grow <= 0 or measured + grow > limit * (1 + 1e-3) or grow > remaining:
        return None
    if not short and needed > limit * (1 + 1e-3):
        return None
    return grow


class Budget:
    """Real seconds left for the profile, on the running event loop's clock (`loop_time`): the
    system's, or a virtual-time loop's, where a profile of an in-process emulator spends the budget
    it would on an idle machine whatever the machine's load."""

    def __init__(self, seconds: float, time_scale: float = 1.0) -> None:
        self.seconds = seconds
        self.time_scale = time_scale
        self.deadline = loop_time() + seconds

    def remaining(self) -> float:
        """Server seconds left (real ones times the time scale)."""
        return max(0.0, self.deadline - loop_time()) * self.time_scale

    def fit(self, plan: StepPlan, e2e: float, rate: float, steps_left: int, least_requests: int) -> StepPlan:
        """`plan`, shrunk to its share of what is left but no shorter than `MIN_LIFETIMES` lifetimes
        and `least_requests` requests; `BudgetExhausted` if even that does not fit."""
        share = self.remaining() / max(1, steps_left)
        if plan.duration <= share:
            return plan
        least = min(plan.window, max(MIN_LIFETIMES * e2e, least_requests / rate))
        window = max(least, min(plan.window, share - plan.settle))
        if plan.settle + window > self.remaining():
            raise BudgetExhausted(f"the budget of {self.seconds:g}s ran out")
        return StepPlan(plan.settle, window)

    def beyond(self, reserve: StepPlan | None) -> float:
        """Server seconds left once `reserve` (the knee's repeat, with its margin) is kept back."""
        return self.remaining() - (0.0 if reserve is None else RESERVE_MARGIN * reserve.duration)

    def holds(self, plan: StepPlan, reserve: StepPlan | None) -> bool:
        """Whether `plan` fits with `reserve` (the knee's repeat) still kept back after it."""
        return plan.duration <= self.beyond(reserve)

    def require(self, plan: StepPlan) -> StepPlan:
        """`plan` unchanged (a deciding step never shrinks); `BudgetExhausted` if it does not fit."""
        if plan.duration > self.remaining():
            raise BudgetExhausted(
                f"the budget of {self.seconds:g}s ran out: a "
                f"deciding step of {plan.duration:.0f}s did not fit"
            )
        return plan


def size(
    budget: Budget,
    kind: Literal["rate", "concurrency"],
    offered: float,
    e2e: float,
    steps_left: int,
    *,
    deciding: bool = False,
    length: float = 1.0,
    output_tokens: float = 128.0,
) -> StepPlan:
    """The step `offered` (a rate, or clients) calls for at a lifetime of `e2e`: a deciding step by
    the window rule, `length` times its window, never shrunk; a scan or closed-loop step shrunk to
    its share of the budget with `steps_left` steps still planned (a closed-loop one first to the
    decode steps that requests of `output_tokens` need: `closed_share`)."""
    if deciding:
        sized = budget.require(deciding_step(e2e, offered))
    elif kind == "rate":
        planned = plan_step(e2e, offered, RATE_REQUESTS, SCAN_LIFETIMES)
        sized = budget.fit(planned, e2e, offered, steps_left, MIN_RATE_REQUESTS)
    else:
        planned = plan_step(e2e, offered / e2e, CONCURRENCY_REQUESTS)
        share = closed_share(output_tokens)
        planned = StepPlan(
            min(planned.settle, max(MIN_CLOSED_SETTLE_LIFETIMES * e2e, planned.settle * share)),
            planned.window * share,
        )
        sized = budget.fit(planned, e2e, offered / e2e, steps_left, MIN_CONCURRENCY_REQUESTS)
    if length != 1.0:
        sized = budget.require(StepPlan(sized.settle, sized.window * length))
    return sized
