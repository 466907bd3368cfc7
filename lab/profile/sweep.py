"""The closed-loop concurrency sweep: 1, 2, 4 … clients until a queue stands, and once more beyond.

It gives the batch curve (TPOT against running requests), the saturated throughput (fitted across
the levels on the plateau, `knee.plateau`), the check that one client alone can meet the SLO at
all, and the request lifetimes every later step is sized by (`lifetime`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lab.load.server import ProfileFailure
from lab.profile import plan
from lab.profile.knee import plateau
from lab.profile.schema import Step
from lab.profile.steps import percentile_key, standing_queue

if TYPE_CHECKING:
    from lab.profile.stepper import Stepper


#: KV-cache usage from which a batch no longer fits without preemptions (vLLM preempts at the
#: block that does not fit; a mean usage this high already has requests waiting for blocks)
_KV_FULL: Final = 0.9


def level_lifetime(level: Step) -> float:
    """A closed-loop level's request lifetime: its clients' (the median), or where none of the
    requests it measured finished within it (2,048-token requests behind a standing queue), its
    running requests' (Little's law). Repeated at the profile's end with a default of one second, such
    a level ran 3 s, completed nothing and read as a 14 % change of the server's speed."""
    return level.e2e_seconds.get("p50") or level.running / max(level.achieved_rate, 1e-9)


def next_lifetime(step: Step, previous: Step | None, clients: int, slots: int | None, *, long: bool) -> float:
    """The lifetime the next level (of `clients` clients) is sized by, from this level `step` and the
    one before it (Little's law: running requests over throughput).

    Past the first standing queue the clients' lifetime is mostly that queue, which a closed loop
    refills at once: the level settles and measures in lifetimes of the running requests (sized by
    the clients', the level beyond took 109 s of a 10-minute budget at six-second lifetimes). Below
    it, requests of up to 128 tokens (`long` False) keep the calibrated rule: the clients' lifetime
    had the throughput stopped growing, twice what a level costs at most where it grew, and seconds
    at most; it keeps the gauges' reads per level that the twin's batch curve is fitted from (sized
    at the last doubling's gain, the six-slot CI emulator's 2- and 4-client levels read 1.5 and 2.8
    running, and its twin ran 9 % slow). Longer requests (`long`) are sized at the lifetime of the
    requests the level will run: the doubled clients, up to the slots, at the throughput the last
    doubling's gain implies (the first doubling at full gain where the slots hold both clients),
    none where the doubled batch would not fit the KV cache (`_KV_FULL`: the engine preempts and
    recomputes; a real vLLM 0.26.0 at 32 clients of 2,048-token requests, 4,096 blocks, gained 7 %
    for twice the clients and its requests lived 20 s where 16 clients' lived 12 s). Sized as though
    every doubling stopped the throughput, that real sweep took 473 s of a 10-minute budget (its
    64-client level alone 136 s) and left no room for a knee."""
    rate = max(step.achieved_rate, 1e-9)
    if not long:
        return (
            step.running / rate
            if standing_queue(step)
            else max(step.e2e_seconds.get("p50", 0.0), clients / rate)
        )
    if previous is None:
        gain = 2.0 if slots is not None and slots >= clients else 1.0
    else:
        gain = min(2.0, max(1.0, rate / max(previous.achieved_rate, 1e-9)))
    cap = step.running if standing_queue(step) else float(slots or clients)
    running = min(float(clients), cap)
    if step.kv_usage * running / max(step.running, 1e-9) > _KV_FULL:
        gain = 1.0
    return max(step.running / rate, running / (rate * gain))


async def sweep(stepper: Stepper, e2e: float) -> tuple[float, tuple[float, float]]:
    """Closed-loop clients doubling until a queue stands, and once more beyond, from an unloaded
    lifetime of `e2e`; the saturated throughput and its range on the plateau. `ProfileFailure` when
    one client alone breaks the SLO."""
    clients, previous, flat, beyond = 1, None, 0, False
    slo, key = stepper.settings.slo, percentile_key(stepper.settings.slo.percentile)
    slots = stepper.settings.max_num_seqs
    long = plan.closed_share(stepper.settings.workload.output_tokens.mean) < 1.0
    while True:
        step = await stepper.step("concurrency", clients, e2e, steps_left=5 + len(plan.RATE_FRACTIONS))
        if clients == 1:
            for name, value, bound, flag in (
                ("TTFT", step.ttft_seconds.get(key), slo.ttft_seconds, "--slo-ttft"),
                ("TPOT", step.tpot_seconds.get(key), slo.tpot_seconds, "--slo-tpot"),
            ):
                if value is not None and value > bound:
                    raise ProfileFailure(
                        f"the SLO cannot be met: one request at a time already has {name} {key} "
                        f"{value * 1000:.0f}ms, above {flag} {bound * 1000:.0f}ms"
                    )
        # Saturated: a queue of at least half the batch stands at the server, so a slot that frees
        # is refilled at once (with a thinner one, clients busy between requests leave slots idle
        # and the throughput reads low); or doubling the clients twice in a row gained nothing
        # (a server whose queue the gauge does not show); one flat step may be noise.
        flat = (
            0
            if previous is None or stepper.throughput(step) > 1.05 * stepper.throughput(previous)
            else flat + 1
        )
        saturated = step.waiting >= max(1.0, 0.5 * step.running) or flat >= 2
        if beyond or clients * 2 > plan.MAX_CLIENTS or (saturated and flat >= 2):
            closed = [s for s in stepper.steps if s.kind == "concurrency"]
            value, low, high = plateau([(stepper.throughput(s), standing_queue(s)) for s in closed])
            return value, (low, high)
        beyond = saturated  # one level past the first standing queue: the plateau needs two points
        e2e = next_lifetime(step, previous, 2 * clients, slots, long=long)
        previous, clients = step, clients * 2
