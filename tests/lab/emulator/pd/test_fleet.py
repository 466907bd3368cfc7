"""The P/D pair's engines in emulated time (lab/emulator/pd/engine.py) and `emulate --pd`
(lab/emulator/pd/fleet.py)."""

from __future__ import annotations

import pytest

from lab.emulator.params import EngineParams
from lab.emulator.pd.engine import DecodeEngine, PrefillEngine
from lab.emulator.pd.fleet import parse_pd
from lab.emulator.request import RequestStatus

PARAMS = EngineParams(max_num_seqs=1, step_jitter=0.0, frontend_seconds=0.0)


def test_a_prefill_engine_holds_a_finished_requests_kv_for_the_transfer() -> None:
    engine = PrefillEngine(PARAMS, transfer_seconds=2.0)
    request = engine.submit(320, 1, ignore_eos=True)
    engine.run_until(0.5)
    assert request.finish_reason == "length" and request.finished is not None
    assert engine.kv.usage == 20 / PARAMS.num_gpu_blocks, "320 tokens in 20 blocks, still held"
    assert not engine.idle
    engine.run_until(request.finished + 2.0 + 1e-9)
    assert engine.kv.usage == 0.0 and engine.idle


def test_a_decode_engine_fetches_then_decodes_without_recomputing_the_prompt() -> None:
    engine = DecodeEngine(PARAMS, transfer_seconds=1.0)
    first = engine.submit(320, 4, ignore_eos=True)
    second = engine.submit(160, 4, ignore_eos=True)
    engine.run_until(5.0)
    assert first.status is RequestStatus.FRONTEND and not engine.idle, "held while its prefill runs elsewhere"
    engine.hand_over(first, 5.0)
    engine.hand_over(second, 5.0)
    assert engine.stages() == {"waiting_to_start": 0, "in_progress": 2, "completed_waiting": 0}
    assert engine.kv.usage == (20 + 10) / PARAMS.num_gpu_blocks, "blocks taken for the incoming KV"
    engine.run_until(6.0 + 1e-9)
    # one slot: the first runs, the second's KV arrived and it waits for the slot
    assert engine.stages() == {"waiting_to_start": 0, "in_progress": 0, "completed_waiting": 1}
    assert [r.request_id for r in engine.running] == [first.request_id]
    engine.run_until(10.0)
    assert first.finish_reason == second.finish_reason == "length"
    assert first.arrival == 5.0 and first.ttft is not None and first.ttft < 1.1, (
        "TTFT starts at the hand-over"
    )
    stats = engine.handover
    assert (stats.prompt_tokens_external, stats.prompt_tokens_local_compute) == (319 + 159, 2)
    assert (stats.external_prefix_cache_queries, stats.external_prefix_cache_hits) == (480, 478)
    assert stats.request_prefill_kv_computed_tokens.total == 2, "one token each computed here"


def test_a_hand_over_waits_for_blocks_to_fetch_into() -> None:
    small = EngineParams(max_num_seqs=4, num_gpu_blocks=300, step_jitter=0.0, frontend_seconds=0.0)
    engine = DecodeEngine(small, transfer_seconds=1.0)
    big = [engine.submit(3200, 800, ignore_eos=True) for _ in range(2)]
    for request in big:
        engine.hand_over(request, 0.0)
    assert engine.stages()["waiting_to_start"] == 1, "200 blocks taken; the second needs 200 more of 100"
    engine.abort(big[0])
    engine.run_until(0.1)
    assert engine.stages() == {"waiting_to_start": 0, "in_progress": 1, "completed_waiting": 0}


@pytest.mark.parametrize("text", ["0:1", "1:0", "2", "a:b", "1:-1"])
def test_pd_must_name_both_pools(text: str) -> None:
    with pytest.raises(ValueError, match="must be P:D, the prefill and decode replicas, each >= 1"):
        parse_pd(text)
    assert parse_pd("3:2") == (3, 2)


def test_a_head_waiting_on_blocks_held_for_a_hand_over_does_not_stop_the_engine() -> None:
    """Nothing running, the queue's head blocked by the KV a finished prefill holds for its hand-over:
    there is no decode to skip (this raised `min() arg is an empty sequence`); the head is admitted
    once the blocks are released."""
    params = EngineParams(max_num_seqs=4, step_jitter=0.0, frontend_seconds=0.0, num_gpu_blocks=300)
    engine = PrefillEngine(params, transfer_seconds=5.0)
    first = engine.submit(4000, 1, ignore_eos=True)  # 250 of the 300 blocks, held 5 s after it ends
    engine.run_until(1.0)
    assert first.finished is not None
    second = engine.submit(2000, 1, ignore_eos=True)  # 125 blocks: waits for the release
    engine.run_until(first.finished + 4.0)
    assert second.first_scheduled is None and not engine.running
    # In small slices, as the emulator's runner calls it (a release is applied between two calls).
    for tenth in range(1, 21):
        engine.run_until(first.finished + 4.0 + tenth / 10)
    assert second.first_scheduled is not None
    assert first.finished + 5.0 <= second.first_scheduled <= first.finished + 5.2


def test_hand_overs_released_at_one_instant_go_in_finishing_order() -> None:
    """The held blocks' heap breaks ties by a counter: runs of one seed are the same whatever the
    memory layout (it was `id(blocks)`)."""
    engine = PrefillEngine(
        EngineParams(max_num_seqs=2, step_jitter=0.0, frontend_seconds=0.0), transfer_seconds=1.0
    )
    requests = [engine.submit(32, 1, ignore_eos=True) for _ in range(2)]
    engine.run_until(0.5)
    assert all(r.finished is not None for r in requests)
    assert [order for _, order, _ in sorted(engine._held)] == [1, 2]


#: a decode engine of two slots and a 64-block pool, deterministic (no jitter, no EOS, no front end)
TWO_SLOTS = EngineParams(
    max_num_seqs=2,
    num_gpu_blocks=64,
    max_model_len=1024,
    step_jitter=0.0,
    frontend_seconds=0.0,
    eos_probability=0.0,
)


def test_hand_overs_do_not_take_the_blocks_a_preempted_request_waits_for() -> None:
    """A request preempted on the decode engine waits at the head of the queue for blocks; a hand-over
    behind it must not take the ones it frees (vLLM allocates a hand-over's blocks in its waiting loop,
    which does not run in a step that preempted and stops at a request it cannot admit). It did: the
    running request then preempted itself too and nothing ran, the queue's head waiting for blocks the
    requests behind it held (`emulate --pd` under load: running 0, completed_waiting 32, forever)."""
    engine = DecodeEngine(TWO_SLOTS, transfer_seconds=1.0)
    requests = [engine.submit(320, 200, ignore_eos=True) for _ in range(4)]  # 20 blocks each, 33 at the end
    for request in requests:
        engine.hand_over(request, 0.0)
    assert engine.stages() == {"waiting_to_start": 1, "in_progress": 3, "completed_waiting": 0}
    # In small slices, as the emulator's runner calls it (fetches start between two calls).
    preempted = False
    for tick in range(1, 601):
        engine.run_until(tick / 20)
        if any(r.num_preemptions for r in engine.waiting):
            preempted = True
            assert engine.stages()["in_progress"] == 0, "no fetch starts while the preempted one waits"
    assert preempted, "the second running request is preempted when the two grow past the pool"
    assert engine.running or not engine.waiting, f"nothing runs, {len(engine.waiting)} wait {engine.stages()}"
    assert [r.finish_reason for r in requests] == ["length"] * 4 and engine.idle


def test_no_fetch_starts_while_the_batch_is_full() -> None:
    """vLLM allocates a hand-over's blocks (and starts its fetch) in its waiting loop, which stops when the
    batch is full (`len(running) == max_num_seqs`); requests still fetching are not running and do not
    count. Hand-overs that arrive while the batch is full wait without blocks. They took them: their KV
    filled the pool while they waited for a slot and the running requests, growing, preempted each other
    (the twin of the H200 pair at its knee: 40 waiting, KV 0.90, preemptions; the real engine 3, 0.47)."""
    engine = DecodeEngine(TWO_SLOTS, transfer_seconds=0.01)
    # 320 prompt tokens in 20 blocks; 27 blocks at 420 tokens, the end: two running take 54 of 64.
    running = [engine.submit(320, 100, ignore_eos=True) for _ in range(2)]
    for request in running:
        engine.hand_over(request, 0.0)
    engine.run_until(0.02)
    assert engine.running == running, "both landed and run: the batch is full"
    late = [engine.submit(320, 100, ignore_eos=True) for _ in range(2)]
    for request in late:
        engine.hand_over(request, engine.now)
    assert engine.stages() == {"waiting_to_start": 2, "in_progress": 0, "completed_waiting": 0}
    assert engine.kv.usage == sum(len(r.blocks) for r in running) / 64, "no blocks taken for the late two"
    # In small slices, as the emulator's runner calls it (fetches start between two calls).
    for tick in range(1, 401):
        engine.run_until(0.02 + tick / 100)
        if len(engine.running) == TWO_SLOTS.max_num_seqs:
            assert all(not f.request.blocks for f in engine.fetching if f.done is None)
    assert engine.stats.num_preemptions == 0, "the running requests grew into free blocks"
    assert all(r.finished is not None for r in running)
    finished = min(r.finished for r in running if r.finished is not None)
    for request in late:
        assert request.first_scheduled is not None and request.first_scheduled >= finished
        assert request.finish_reason == "length" and request.num_preemptions == 0
    assert engine.idle
