"""The prefill probe, run: bursts of the workload's mean prompt sent at once from idle (what the
bursts are and how they are fitted: `prefill`)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lab.load.driver import answered
from lab.profile import plan
from lab.profile.prefill.plan import PrefillFit, burst_sizes, fit_prefill, probe_order

if TYPE_CHECKING:
    from lab.profile.stepper import Stepper


async def probe(stepper: Stepper) -> PrefillFit | None:
    """Bursts of requests of the workload's mean prompt sent at once from idle, in interleaved rounds
    after one unfitted round; each burst's point is its prompt tokens and its mean TTFT, the
    server's own (its histogram's Δsum/Δcount when it counted exactly this burst; the client's
    timing carries the network's jitter, the emulator's is scaled with its clock), else the client's
    last. The burst's requests prefill in one step while they fit the token budget (vLLM's default
    8,192 holds the 8B engine's eight 1,024-token prompts), so their mean is the step's end. The
    background reader pauses meanwhile: a `/metrics` page rendered while a burst waits would add
    its time to that burst alone. Each point lands in the run's `prefill_probe`; `None` when the
    server's slots or cache hold fewer than two burst sizes (one fits no slope)."""
    settings, result, reader = stepper.settings, stepper.result, stepper.reader
    server = result.server
    prompt = round(settings.workload.prompt_tokens.mean)
    # Slots the server was seen to run at once in the sweep, when neither flag nor server says.
    seen = max((round(s.running) for s in stepper.steps if s.kind == "concurrency"), default=0)
    slots = settings.max_num_seqs or (server.max_num_seqs if server else None) or seen or None
    kv = (
        server.num_gpu_blocks * server.block_size
        if server and server.num_gpu_blocks and server.block_size
        else None
    )
    sizes = burst_sizes(slots, prompt, kv)
    if len(sizes) < 2:
        return None
    await stepper.settle()  # the sweep's last level left a standing queue
    now = stepper.clock.now()
    stepper.view.phase(f"prefill probe (bursts of {', '.join(map(str, sizes))} x {prompt} tokens)", now, now)
    fitted: list[tuple[float, float]] = []
    driver = stepper.driver
    await reader.stop()
    try:
        before = await reader.fetch()
        for sent, size in enumerate(probe_order(sizes, 1 + plan.PREFILL_ROUNDS, settings.seed)):
            outcomes = await asyncio.gather(
                *(driver.one(driver.sampler.prompt(prompt), 2) for _ in range(size))
            )
            ttfts = [o.ttft for o in answered(outcomes, "prefill probe") if o.ttft is not None]
            after = await reader.fetch()
            counted, before = after.ttft.minus(before.ttft), after
            if len(ttfts) < size:
                continue  # a burst with a failed request did not prefill all its tokens
            point = (
                float(size * prompt),
                counted.mean if counted.count == size and counted.mean else max(ttfts),
            )
            result.prefill_probe.append(point)
            if sent >= len(sizes):
                fitted.append(point)
    finally:
        reader.start()
    return fit_prefill(fitted)
