"""The engine's plain histograms and what a finished request records."""

from __future__ import annotations

import pytest

from adapter.vocabulary import vllm
from lab.emulator.request import Request, RequestStatus
from lab.emulator.stats import FINISH_REASONS, BucketCounts, EngineStats


@pytest.mark.parametrize(
    ("value", "bucket"),
    [
        pytest.param(0.3, 0, id="equal to the first bound falls in it (le)"),
        pytest.param(0.31, 1, id="just above falls in the next"),
        pytest.param(0.0, 0, id="zero falls in the first"),
        pytest.param(1e9, 21, id="beyond the last bound falls in +Inf"),
    ],
)
def test_histogram_buckets_follow_prometheus_le(value: float, bucket: int) -> None:
    """A value lands in the first bucket whose upper bound is >= the value."""
    histogram = BucketCounts(vllm.REQUEST_LATENCY_BUCKETS)
    histogram.observe(value)
    assert histogram.counts[bucket] == 1
    assert histogram.count == 1


def test_histogram_records_many_observations_at_once() -> None:
    """observe(value, count) equals count single observations (used to skip identical steps)."""
    bulk, single = BucketCounts((1, 2, 5)), BucketCounts((1, 2, 5))
    bulk.observe(2.0, 7)
    for _ in range(7):
        single.observe(2.0)
    assert (bulk.counts, bulk.total) == (single.counts, single.total)
    assert bulk.cumulative() == [0, 7, 7, 7]


def _finished(num_output: int, first_scheduled: float | None = 1.0) -> Request:
    return Request(
        request_id="r",
        prompt_len=100,
        max_tokens=50,
        max_tokens_param=50,
        stop_len=num_output,
        stop_reason="length",
        block_hashes=[],
        arrival=0.0,
        enqueued=0.5,
        status=RequestStatus.FINISHED,
        num_output=num_output,
        first_scheduled=first_scheduled,
        first_token=2.0 if first_scheduled else None,
        finished=5.0,
        finish_reason="length",
        num_cached_prompt_tokens=32,
    )


def test_finished_request_phases_are_timed_as_vllm_times_them() -> None:
    """Queue from engine arrival, prefill to first token, decode to the end, TPOT over n-1 tokens."""
    stats = EngineStats(4096)
    stats.record_finished(_finished(31))
    assert stats.e2e_request_latency.total == pytest.approx(5.0)
    assert stats.request_queue_time.total == pytest.approx(0.5)
    assert stats.request_prefill_time.total == pytest.approx(1.0)
    assert stats.request_inference_time.total == pytest.approx(4.0)
    assert stats.request_decode_time.total == pytest.approx(3.0)
    assert stats.request_time_per_output_token.total == pytest.approx(3.0 / 30)
    assert stats.request_prefill_kv_computed_tokens.total == 68
    assert stats.request_success["length"] == 1
    assert set(stats.request_success) == set(FINISH_REASONS)


def test_request_aborted_before_scheduling_only_counts_its_reason() -> None:
    """An abort with no phases adds to request_success and to no latency histogram."""
    stats = EngineStats(4096)
    request = _finished(0, first_scheduled=None)
    request.finish_reason = "abort"
    stats.record_finished(request)
    assert stats.request_success["abort"] == 1
    assert stats.e2e_request_latency.count == 0
