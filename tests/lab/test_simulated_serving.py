"""The lab's one loop of requests served by emulated engines in simulated time (`lab.simulated_serving`)."""

from __future__ import annotations

import random

import pytest

from lab.emulator import Engine, EngineParams
from lab.simulated_serving import serve, tpot

PARAMS = EngineParams(max_num_seqs=8, step_base_seconds=0.03, step_per_seq_seconds=0.002, step_jitter=0.0)


def _stream(rate: float, count: int, seed: int = 0) -> list[tuple[float, int, int]]:
    draw, at, stream = random.Random(seed), 0.0, []
    for _ in range(count):
        at += draw.expovariate(rate)
        stream.append((at, draw.randint(64, 512), draw.randint(16, 128)))
    return stream


def test_requests_go_round_robin_in_the_order_sent_and_all_finish_when_drained() -> None:
    stream = _stream(2.0, 60)
    engines = [Engine(PARAMS, seed=i) for i in range(3)]
    served = serve(engines, stream)
    assert [(r.arrival, r.prompt_len, r.max_tokens) for r in served] == stream
    assert all(r.finished is not None and r.num_output == r.max_tokens for r in served), "EOS is ignored"
    assert all(e.idle for e in engines)
    # Each engine numbers its own requests: the third engine got the 3rd, 6th, ... of the stream.
    assert [r.request_id for r in served[2::3]] == [f"cmpl-{i}" for i in range(20)]


def test_a_deadline_leaves_what_it_did_not_reach_unfinished() -> None:
    stream = _stream(3.0, 300)  # past the engine's capacity: the queue grows
    served = serve([Engine(PARAMS)], stream, until=stream[-1][0])
    assert served[0].finished is not None and served[-1].first_token is None
    assert tpot(served[-1]) is None


def test_one_request_at_a_time_serves_as_the_whole_stream_queued_ahead() -> None:
    """Without step jitter the engine takes the same steps whether a request is handed over at its
    arrival (as here) or all are queued up front with their times; only the float sums of long decode
    runs, cut at other points, differ in their last bits."""
    stream = _stream(0.8, 400)
    ahead = Engine(PARAMS)
    queued = [ahead.submit(p, m, ignore_eos=True, at=at) for at, p, m in stream]
    ahead.run_until(1e6)
    served = serve([Engine(PARAMS)], stream)
    for mine, theirs in zip(served, queued, strict=True):
        assert mine.first_token == pytest.approx(theirs.first_token, rel=1e-12, abs=1e-9)
        assert mine.finished == pytest.approx(theirs.finished, rel=1e-12, abs=1e-9)


def test_tpot_is_the_mean_time_per_token_after_the_first() -> None:
    """Alone on the engine, every token after the first takes one decode step of one sequence."""
    (request,) = serve([Engine(PARAMS)], [(0.0, 16, 11)])
    assert tpot(request) == pytest.approx(PARAMS.step_seconds(1, 1))
    (single,) = serve([Engine(PARAMS)], [(0.0, 16, 1)])
    assert tpot(single) is None, "one token has no time per output token"
