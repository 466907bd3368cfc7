"""The continuous-batching engine in simulated time: each rule of DESIGN.md §4 and vllm-metrics.md."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from lab.emulator.engine import AdmissionRejected, Engine
from lab.emulator.params import EngineParams
from lab.emulator.request import Request, RequestStatus

# No jitter and no early EOS: step times and output lengths are exactly what the test sets.
EXACT = EngineParams(step_jitter=0.0, eos_probability=0.0)


def _drain(engine: Engine, limit: float = 600.0) -> None:
    engine.run_until(engine.now + limit)
    assert engine.idle, "the engine should have finished everything"


def _workload(
    engine: Engine, seconds: float, rate: float, seed: int, *, ignore_eos: bool = True, advance: bool = True
) -> list[Request]:
    """Poisson arrivals of 200-1800-token prompts (30% share a 512-token prefix), 16-256 output tokens;
    with `advance` the engine runs up to each arrival, else all are submitted ahead of time."""
    rng = random.Random(seed)
    shared = list(range(512))
    requests: list[Request] = []
    t = engine.now
    while True:
        t += rng.expovariate(rate)
        if t > seconds:
            return requests
        if advance:
            engine.run_until(t)
        base = rng.randrange(1 << 40)
        length = rng.randint(200, 1800)
        prompt = (
            shared + list(range(base, base + length - 512))
            if rng.random() < 0.3
            else list(range(base, base + length))
        )
        requests.append(engine.submit(prompt, rng.randint(16, 256), ignore_eos=ignore_eos, at=t))


def test_running_never_exceeds_max_num_seqs_and_everything_finishes() -> None:
    """At most max_num_seqs requests run; the rest wait and are served in turn."""
    engine = Engine(replace(EXACT, max_num_seqs=4))
    requests = [engine.submit(50, 20) for _ in range(30)]
    peak = 0
    while not engine.idle:
        engine.run_until(engine.now + 0.001)
        peak = max(peak, len(engine.running))
    assert peak == 4
    assert all(r.status is RequestStatus.FINISHED and r.num_output == 20 for r in requests)
    assert engine.stats.request_success["length"] == 30


def test_running_requests_hold_ceil_tokens_over_block_size_blocks() -> None:
    """Between steps every running request holds exactly ceil(tokens in its KV / block_size) blocks."""
    engine = Engine(EXACT)
    _workload(engine, 2.0, 20.0, seed=1, advance=False)
    checked = 0
    while not engine.idle:
        engine.step() if engine.running or engine.waiting else engine.run_until(engine.now + 0.01)
        for request in engine.running:
            assert len(request.blocks) == math.ceil(request.num_computed / 16)
            checked += 1
    assert checked > 1000
    assert engine.kv.usage == 0.0


def test_admission_waits_for_blocks() -> None:
    """A request whose prompt does not fit the free blocks waits, though a slot is free."""
    params = replace(EXACT, num_gpu_blocks=80, max_model_len=1280)
    engine = Engine(params)
    first = engine.submit(1000, 100)
    second = engine.submit(1000, 100)
    engine.run_until(0.05)
    assert (len(engine.running), len(engine.waiting)) == (1, 1)
    _drain(engine)
    assert second.first_scheduled is not None and first.finished is not None
    assert second.first_scheduled >= first.finished
    assert engine.stats.num_preemptions == 0


def test_preemption_when_growth_runs_out() -> None:
    """When a running request cannot grow, the newest running one is preempted, re-queued first,
    recomputed later, and counted in num_preemptions and request_num_preemptions."""
    params = replace(EXACT, num_gpu_blocks=20, max_model_len=320, enable_prefix_caching=False)
    engine = Engine(params)
    older = engine.submit(100, 200)
    newer = engine.submit(100, 200)
    _drain(engine)
    assert older.num_preemptions == 0
    assert newer.num_preemptions >= 1
    assert engine.stats.num_preemptions == newer.num_preemptions
    histogram = engine.stats.request_num_preemptions
    assert histogram.total == engine.stats.num_preemptions
    assert (older.num_output, newer.num_output) == (200, 200)
    assert engine.stats.inter_token_latency.count == 2 * 199, "one ITL per token after the first"


@pytest.mark.parametrize("prompt_len", [100, 1000, 3000])
def test_prefill_time_grows_with_prompt_tokens(prompt_len: int) -> None:
    """On an idle engine TTFT is the front-end time plus one step whose cost grows per prompt token."""
    engine = Engine(EXACT)
    request = engine.submit(prompt_len, 4)
    _drain(engine)
    assert request.ttft == pytest.approx(EXACT.frontend_seconds + EXACT.step_seconds(1, prompt_len))
    assert engine.stats.request_queue_time.total == pytest.approx(0.0), "queue time excludes the front-end"


def _decode_tpot(request: Request) -> float:
    assert request.finished is not None and request.first_token is not None
    return (request.finished - request.first_token) / (request.num_output - 1)


def test_tpot_grows_with_batch_size() -> None:
    """Per-request TPOT is the decode step time, which grows with the number of running requests."""

    def tpot(batch: int) -> float:
        engine = Engine(EXACT)
        requests = [engine.submit(64, 200, ignore_eos=True) for _ in range(batch)]
        _drain(engine)
        return sum(_decode_tpot(r) for r in requests) / batch

    alone, crowded = tpot(1), tpot(27)
    assert alone == pytest.approx(EXACT.step_seconds(1, 1), rel=0.01)
    assert crowded == pytest.approx(EXACT.step_seconds(27, 27), rel=0.01)
    assert 1.5 < crowded / alone < 2.5


def _fingerprint(engine: Engine) -> tuple[object, ...]:
    s = engine.stats
    return (
        s.generation_tokens,
        s.prompt_tokens,
        s.num_preemptions,
        dict(s.request_success),
        s.prefix_cache_queries,
        s.prefix_cache_hits,
        s.inter_token_latency.counts,
        s.time_to_first_token.counts,
        s.e2e_request_latency.counts,
        s.iteration_tokens.counts,
        s.request_num_preemptions.counts,
    )


def test_same_seed_replays_exactly_and_another_seed_does_not() -> None:
    """The seed fixes EOS draws and step jitter: equal seeds give equal statistics."""
    runs = []
    for seed in (7, 7, 8):
        engine = Engine(EngineParams(eos_probability=0.01), seed=seed)
        _workload(engine, 5.0, 15.0, seed=3, ignore_eos=False)
        _drain(engine)
        runs.append((_fingerprint(engine), engine.stats.e2e_request_latency.total))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_fast_forward_gives_the_step_by_step_result() -> None:
    """Skipping runs of identical decode steps changes nothing, even under KV pressure with
    preemptions and a blocked queue head (exact with step_jitter=0)."""
    results = []
    for fast in (True, False):
        engine = Engine(replace(EXACT, num_gpu_blocks=600), fast_forward=fast)
        _workload(engine, 6.0, 12.0, seed=5)
        _drain(engine)
        results.append((engine, _fingerprint(engine)))
    (fast_engine, fast_print), (slow_engine, slow_print) = results
    assert fast_engine.stats.num_preemptions > 0, "the workload must exercise preemption"
    assert fast_print == slow_print
    assert fast_engine.steps == slow_engine.steps
    assert fast_engine.stats.e2e_request_latency.total == pytest.approx(
        slow_engine.stats.e2e_request_latency.total
    )


def test_fast_forward_in_short_slices_with_aborts_gives_the_step_by_step_result() -> None:
    """As a runner drives it (many short `run_until` calls, each skipping a few decode steps) and with
    aborts of the request nearest its end between them, the fast-forward still matches step by step:
    what it remembers of the batch from one call to the next must not outlive a change to it."""
    results = []
    for fast in (True, False):
        engine = Engine(replace(EXACT, num_gpu_blocks=400), fast_forward=fast)
        rng = random.Random(11)
        requests = [engine.submit(rng.randint(100, 1500), rng.randint(16, 300), at=i / 3) for i in range(40)]
        t = 0.0
        while not engine.idle:
            t += 0.03
            engine.run_until(t)
            if engine.running and rng.random() < 0.02:
                engine.abort(min(engine.running, key=lambda r: r.stop_len - r.num_output))
        ends = [(r.num_output, r.finish_reason) for r in requests]
        results.append((_fingerprint(engine), engine.steps, ends, [r.last_token for r in requests]))
    (fast_print, fast_steps, fast_ends, fast_times), (slow_print, slow_steps, slow_ends, slow_times) = results
    assert (fast_print, fast_steps, fast_ends) == (slow_print, slow_steps, slow_ends)
    assert fast_times == pytest.approx(slow_times)  # a skipped run's end is one sum, not many
    assert sum(reason == "abort" for _, reason in fast_ends) > 2


def test_finish_reasons_follow_ignore_eos() -> None:
    """ignore_eos runs to max_tokens (length); otherwise an EOS usually stops it first (stop)."""
    engine = Engine(EngineParams(eos_probability=0.2), seed=1)
    forced = [engine.submit(20, 100, ignore_eos=True) for _ in range(5)]
    free = [engine.submit(20, 100) for _ in range(20)]
    _drain(engine)
    assert {r.finish_reason for r in forced} == {"length"}
    assert all(r.num_output == 100 for r in forced)
    assert sum(r.finish_reason == "stop" for r in free) >= 18
    assert engine.stats.request_success["stop"] + engine.stats.request_success["length"] == 25


@pytest.mark.parametrize("when", [0.0, 0.005, 0.05], ids=["in the front-end", "waiting", "running"])
def test_abort_frees_blocks_and_counts_abort(when: float) -> None:
    """An aborted request leaves the engine, frees its blocks and counts as finished_reason=abort."""
    engine = Engine(replace(EXACT, max_num_seqs=1))
    engine.submit(500, 1000)
    request = engine.submit(500, 1000, at=0.0 if when else 0.02)
    engine.run_until(when)
    if when == 0.05:
        engine.abort(engine.running[0])
        request = engine.running[0] if engine.running else request
        engine.run_until(0.1)
    engine.abort(request)
    assert request.finish_reason == "abort"
    assert engine.stats.request_success["abort"] >= 1
    assert request.blocks == []


def test_queue_limit_rejects_and_counts() -> None:
    """With max_num_queued_reqs, a full queue refuses requests (vLLM answers 503) and counts them."""
    engine = Engine(replace(EXACT, max_num_queued_reqs=2))
    engine.submit(10, 5)
    engine.submit(10, 5)
    with pytest.raises(AdmissionRejected, match="waiting queue is full"):
        engine.submit(10, 5)
    assert engine.stats.admission_rejections["max_num_queued_reqs"] == 1


def test_shared_prefix_hits_the_prefix_cache() -> None:
    """A second prompt sharing 512 tokens reuses 32 cached blocks; queries count every looked-up token."""
    engine = Engine(EXACT)
    shared = list(range(512))
    engine.submit([*shared, *range(1000, 1100)], 4)
    _drain(engine)
    engine.submit([*shared, *range(2000, 2300)], 4)
    _drain(engine)
    stats = engine.stats
    assert stats.prompt_tokens_local_cache_hit == 512
    assert stats.prefix_cache_hits == 512
    assert stats.prefix_cache_queries == stats.prompt_tokens == 612 + 812


def test_blocked_queue_head_is_looked_up_on_every_step() -> None:
    """A waiting head that does not fit is looked up again on every step, so prefix-cache queries
    outgrow prompt tokens under KV pressure (the 4-11x inflation seen on a real server, §8)."""
    engine = Engine(replace(EXACT, num_gpu_blocks=100, max_model_len=1600))
    engine.submit(1000, 500)
    engine.submit(1000, 100)
    engine.run_until(0.5)
    assert len(engine.waiting) == 1
    # the running request's one lookup, then the head's on each step
    assert engine.stats.prefix_cache_queries == 1000 + 1000 * engine.steps
    assert engine.steps > 100
    assert engine.stats.prompt_tokens == 1000


def test_idle_engine_jumps_to_the_target_time() -> None:
    """Without work, run_until just moves the clock; no step is spent."""
    engine = Engine(EXACT, start=5.0)
    engine.run_until(100.0)
    assert (engine.now, engine.steps) == (100.0, 0)
