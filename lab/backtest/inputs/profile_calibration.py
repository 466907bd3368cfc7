"""The backtest's service model from a `vllm-autoscale profile` file: the capacity measured with a
standing queue, the request's time against the batch, the TTFT below the queue, the KV per request.
A profile is the replica measured alone; `lab.backtest.calibration` holds the model and the other
ways to get one (a capacity given, recorded fleet series)."""

from __future__ import annotations

import statistics
from dataclasses import replace

from lab.backtest.calibration import Calibration, CalibrationError, Estimate, defaults, fit_line, fit_shape
from lab.profile.schema import Profile, Step


def from_profile(profile: Profile, source: str) -> Calibration:
    """The service model measured by `vllm-autoscale profile`."""
    steps = [s for s in profile.steps if s.kind == "rate" and s.achieved_rate > 0]
    slots_seen = [s.running for s in steps]
    closed_loop = not steps
    if closed_loop:
        steps, slots_seen = _closed_loop_steps(profile, source)
    saturated = [s.achieved_rate for s in steps if not s.queue_stable]
    # Newer profiles measure the throughput with a standing queue directly (a concurrency sweep).
    measured = profile.saturated_rate
    if measured:
        band = [*saturated, measured]
        capacity = Estimate(
            measured, min(band), max(band), f"profile {source}: throughput with a standing queue"
        )
    elif saturated:
        capacity = Estimate(
            statistics.median(saturated),
            min(saturated),
            max(saturated),
            f"profile {source}: median throughput of {len(saturated)} saturated steps",
        )
    else:
        best = max(s.achieved_rate for s in steps)
        capacity = Estimate(
            best, best, best, f"profile {source}: no step saturated; the highest throughput (a lower bound)"
        )
    slots = max(slots_seen)
    model = defaults(capacity.value, slots)
    methods = {"slots": f"profile {source}: most running in a step"}
    if closed_loop:
        # A level's rate is its clients over a window of a few requests; the client's own mean
        # latency at that batch is the measurement.
        stable = [(s.running, s.e2e_seconds["mean"]) for s in steps if "mean" in s.e2e_seconds]
        how = f"mean latency of {len(stable)} closed-loop levels without a queue"
    else:
        stable = [
            (s.running, s.concurrency / s.achieved_rate) for s in steps if s.queue_stable and s.running > 0
        ]
        how = f"Little's law over {len(stable)} stable steps"
    shape = fit_shape(stable)
    methods["shape"] = f"profile {source}: {how}" if shape else "the real run's"
    ttfts = [s.ttft_seconds["p50"] for s in steps if "p50" in s.ttft_seconds and s.queue_stable]
    kv = [s.kv_usage / s.running for s in steps if s.running > 0 and s.kv_usage < 0.95]
    growth, ttft_how = _ttft_line(profile, source)
    model = replace(
        model,
        shape=shape or model.shape,
        ttft_base=growth[0] if growth else (min(ttfts) if ttfts else model.ttft_base),
        ttft_slope=growth[1] if growth else 0.0,
        output_tokens=profile.workload.output_tokens.mean or model.output_tokens,
        kv_per_request=statistics.median(kv) if kv else model.kv_per_request,
    )
    methods["ttft_base"] = (
        f"{ttft_how}, {growth[1] * 1000:.3g} ms more per running request"
        if growth
        else (f"profile {source}: lowest p50 of a stable step" if ttfts else "the real run's")
    )
    methods["kv_per_request"] = f"profile {source}: KV usage per running request" if kv else "1 / (slots + 1)"
    saturation = {k: float(v) for k, v in profile.saturation.items()}
    knee = profile.knee.rate if profile.knee is not None and profile.complete else None
    return Calibration(model, capacity, methods, saturation, knee)


def _ttft_line(profile: Profile, source: str) -> tuple[tuple[float, float] | None, str]:
    """TTFT against the batch where nothing queued: (intercept, slope) and how it was found.

    Open arrivals (the rate steps) are what a fleet sees. Closed-loop clients whose requests all have
    one length run in lockstep: a level of c clients sends c prompts at once, so its TTFT times a burst
    of c prefills (examples/kv-s0-profile.json: p50 94 ms at 4 clients, 41.5 ms at 3.6 running under
    open arrivals; the 2,048-token profile: 275 ms at 16 clients, 46 ms at 20 running in the open-loop
    step recorded beside it). Without three open-loop steps, the unloaded TTFT is the one-client
    level's (no other prefill to wait for) and it grows as the decode step does (the server's TPOT
    over the levels): an open arrival waits for the step in progress."""
    unqueued = [
        s
        for s in profile.steps
        if "p50" in s.ttft_seconds and s.queue_stable and s.running > 0 and s.concurrency - s.running < 0.5
    ]
    arrivals = [(s.running, s.ttft_seconds["p50"]) for s in unqueued if s.kind == "rate"]
    growth = fit_line(arrivals)
    if growth:
        return (
            growth,
            f"profile {source}: p50 against the batch over {len(arrivals)} open-loop steps without a queue",
        )
    levels = sorted((s for s in unqueued if s.kind == "concurrency"), key=lambda s: s.running)
    steps = [(s.running, s.server_tpot_seconds) for s in levels if s.server_tpot_seconds]
    decode = fit_line([(b, float(t)) for b, t in steps])
    if not levels or decode is None:
        return None, ""
    alone = levels[0].ttft_seconds["p50"]
    how = (
        f"profile {source}: p50 of its {levels[0].running:.3g}-running level, growing with the decode step "
        f"(server TPOT over {len(steps)} closed-loop levels; their TTFT is lockstep prefill bursts)"
    )
    return (max(0.0, alone - decode[1] * levels[0].running), decode[1]), how


def _closed_loop_steps(profile: Profile, source: str) -> tuple[list[Step], list[float]]:
    """A profile whose budget ran out before its open-loop steps (the 2,048-token one of
    runs/2026-11-26-real-vllm-0.26.0-h200): its closed-loop levels measured the same server, and those
    where nothing waited give a request's time at their batch (`from_profile` reads the client's mean
    latency there). The levels with a queue still count for the most running; the capacity is the one
    measured with a standing queue (`saturated_rate`), which such a profile must have."""
    levels = [s for s in profile.steps if s.kind == "concurrency" and s.achieved_rate > 0]
    unqueued = [s for s in levels if s.concurrency - s.running < 0.5]
    if not unqueued or not profile.saturated_rate:
        raise CalibrationError(
            f"profile {source} has no rate step with completed requests, and no closed-loop level "
            "without a queue beside a throughput with a standing queue to take their place"
        )
    return unqueued, [s.running for s in levels]
