"""vLLM V1's preemption by recompute in the emulated engine (`lab.emulator.engine`), rule by rule:
the newest running request is the victim, it goes back to the front of the queue and comes back
before any new request, nothing is admitted in the step that preempted, and it recomputes only the
blocks that others took from its cached prompt *and generated* tokens."""

from __future__ import annotations

import pytest

from lab.emulator.engine import Engine
from lab.emulator.params import EngineParams
from lab.emulator.request import Request, RequestStatus

# Ten blocks of four tokens; a step lasts 1 + (tokens scheduled - requests scheduled) seconds, so a
# step's length says how many tokens it computed beyond one per request.
TIGHT = EngineParams(
    max_num_seqs=3,
    num_gpu_blocks=10,
    block_size=4,
    max_model_len=40,
    max_num_batched_tokens=64,
    step_base_seconds=1.0,
    step_per_seq_seconds=0.0,
    step_per_prefill_token_seconds=1.0,
    step_jitter=0.0,
    eos_probability=0.0,
    frontend_seconds=0.0,
)


def _step_until(engine: Engine, done: object, limit: int = 500) -> None:
    for _ in range(limit):
        if done():  # type: ignore[operator]
            return
        engine.step()
    raise AssertionError("the condition never came")


def _waiting(request: Request) -> bool:
    # A function, so that mypy does not pin the status the assertion above narrowed.
    return request.status is RequestStatus.WAITING


def _pair(engine: Engine, prompt: list[int] | int) -> tuple[Request, Request]:
    """A (16 output tokens: 6 blocks at the end) and B (20: 7 blocks), admitted together: at 20
    tokens each they fill the pool, and A's next block preempts B."""
    first = engine.submit(prompt, 16, ignore_eos=True, at=0.0)
    second = engine.submit(
        prompt if isinstance(prompt, int) else [t + 1 for t in prompt], 20, ignore_eos=True, at=0.0
    )
    engine.run_until(0.0)
    return first, second


@pytest.mark.parametrize("prompt", [8, list(range(100, 108))], ids=["length", "token-ids"])
def test_a_preempted_request_recomputes_only_what_was_evicted(prompt: list[int] | int) -> None:
    engine = Engine(TIGHT)
    a, b = _pair(engine, prompt)
    _step_until(engine, lambda: b.num_preemptions == 1)
    assert a.status is RequestStatus.RUNNING and b.status is RequestStatus.WAITING
    preempted_at = b.num_tokens  # 8 prompt + 13 generated, 20 of them computed: 5 full blocks
    started = engine.now
    while _waiting(b):
        started = engine.now
        engine.step()
    # Admitted alone after A finished, its step lasted as many seconds as it computed tokens: the
    # block A took from the free queue (its tail, freed first) and the token not yet computed, 5; its
    # prompt and first 8 generated tokens were still cached. Recomputing all (vLLM V0), or with a
    # cache of prompts only, takes 21 or 13.
    assert a.finish_reason == "length"
    assert preempted_at == 21
    assert round(engine.now - started) == 5
    _step_until(engine, lambda: engine.idle)
    assert b.num_output == 20 and b.finish_reason == "length"


def test_the_newest_is_preempted_and_comes_back_before_new_arrivals() -> None:
    engine = Engine(TIGHT)
    a, b = _pair(engine, 8)
    _step_until(engine, lambda: b.num_output == 13)  # the next step preempts (see above)
    late = engine.submit(4, 2, ignore_eos=True, at=engine.now)  # one block: it would fit a slot now
    engine.run_until(engine.now)
    steps = engine.steps
    _step_until(engine, lambda: b.num_preemptions == 1)
    assert engine.steps == steps + 1 and a.num_preemptions == 0
    # The victim is the newest running request (B, admitted after A), at the queue's front; the step
    # that preempted admitted nothing, though a slot and a block were free.
    assert list(engine.waiting) == [b, late] and late.status is RequestStatus.WAITING
    _step_until(engine, lambda: late.status is not RequestStatus.WAITING)
    assert b.status is not RequestStatus.WAITING, "the new request went ahead of the preempted one"
    assert (b.first_scheduled or 0.0) < (late.first_scheduled or 0.0)


def test_lookups_of_a_preempted_request_are_not_prefix_cache_queries() -> None:
    engine = Engine(TIGHT)
    _a, b = _pair(engine, list(range(100, 108)))
    _step_until(engine, lambda: engine.idle)
    assert b.num_preemptions == 1
    # vLLM counts a resumed request's lookups apart (`preempted_queries`): only the two first ones.
    assert engine.stats.prefix_cache_queries == 16
    assert engine.stats.prefix_cache_hits == 0


def test_fast_forward_gives_the_step_by_step_result_through_preemptions() -> None:
    def run(fast: bool) -> list[tuple[float | None, int]]:
        engine = Engine(
            EngineParams(num_gpu_blocks=300, step_jitter=0.0, eos_probability=0.0), fast_forward=fast
        )
        requests = [engine.submit(700, 1500, ignore_eos=True, at=0.4 * i) for i in range(12)]
        engine.run_until(1e4)
        return [(r.finished, r.num_preemptions) for r in requests]

    fast, slow = run(True), run(False)
    assert sum(p for _f, p in fast) > 0, "the pool should force preemptions"
    # The same steps; a run of them summed at once differs from one by one only in the last bits.
    assert [p for _f, p in fast] == [p for _f, p in slow]
    assert [f for f, _p in fast] == pytest.approx([f for f, _p in slow], rel=1e-9)
