"""The engine's statistics, kept as plain numbers and rendered to Prometheus only when scraped.

Keeping them out of `prometheus_client` objects lets the engine record a run of identical steps in
one call (`BucketCounts.observe(value, count)`), which is what makes simulated time fast.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import Final

from adapter.vocabulary import vllm
from lab.emulator.request import Request

#: `finished_reason` label values, pre-created at start as vLLM does (`FINISH_REASON_STRINGS`)
FINISH_REASONS: Final = ("stop", "length", "abort", "error", "repetition")
#: `reason` label values of `vllm:admission_rejections_total`
REJECTION_REASONS: Final = ("max_num_queued_reqs", "max_num_queued_tokens")


class BucketCounts:
    """A histogram's counts per bucket, with Prometheus `le` semantics (a value equal to a bound falls in
    its bucket); `metrics_page` writes them as a histogram family."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Iterable[float]) -> None:
        self.bounds: tuple[float, ...] = tuple(float(b) for b in bounds)
        self.counts: list[int] = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, count: int = 1) -> None:
        """Record `count` observations of `value`."""
        self.counts[bisect_left(self.bounds, value)] += count
        self.total += value * count

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[int]:
        """Cumulative counts for each bound and then `+Inf`."""
        out: list[int] = []
        running = 0
        for count in self.counts:
            running += count
            out.append(running)
        return out


class EngineStats:
    """Everything one engine counts; attribute names follow the vLLM metric they feed."""

    def __init__(self, max_model_len: int) -> None:
        tokens = vllm.request_tokens_buckets(max_model_len)
        self.prompt_tokens = 0
        self.prompt_tokens_local_compute = 0
        self.prompt_tokens_local_cache_hit = 0
        self.generation_tokens = 0
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0
        self.num_preemptions = 0
        self.request_success: dict[str, int] = dict.fromkeys(FINISH_REASONS, 0)
        self.admission_rejections: dict[str, int] = dict.fromkeys(REJECTION_REASONS, 0)
        self.iteration_tokens = BucketCounts(vllm.ITERATION_TOKENS_BUCKETS)
        self.time_to_first_token = BucketCounts(vllm.TTFT_BUCKETS)
        self.inter_token_latency = BucketCounts(vllm.INTER_TOKEN_LATENCY_BUCKETS)
        self.request_time_per_output_token = BucketCounts(vllm.INTER_TOKEN_LATENCY_BUCKETS)
        self.e2e_request_latency = BucketCounts(vllm.REQUEST_LATENCY_BUCKETS)
        self.request_queue_time = BucketCounts(vllm.REQUEST_LATENCY_BUCKETS)
        self.request_inference_time = BucketCounts(vllm.REQUEST_LATENCY_BUCKETS)
        self.request_prefill_time = BucketCounts(vllm.REQUEST_LATENCY_BUCKETS)
        self.request_decode_time = BucketCounts(vllm.REQUEST_LATENCY_BUCKETS)
        self.request_prompt_tokens = BucketCounts(tokens)
        self.request_generation_tokens = BucketCounts(tokens)
        self.request_max_num_generation_tokens = BucketCounts(tokens)
        self.request_params_max_tokens = BucketCounts(tokens)
        self.request_prefill_kv_computed_tokens = BucketCounts(tokens)
        self.request_params_n = BucketCounts(vllm.REQUEST_PARAMS_N_BUCKETS)
        self.request_num_preemptions = BucketCounts(vllm.REQUEST_NUM_PREEMPTIONS_BUCKETS)

    def record_first_token(self, request: Request) -> None:
        """Prompt counters, counted once per request when its prefill first completes (as vLLM does)."""
        assert request.first_token is not None
        self.time_to_first_token.observe(request.first_token - request.arrival)
        cached = request.num_cached_prompt_tokens
        self.prompt_tokens += request.prompt_len
        self.prompt_tokens_local_cache_hit += cached
        self.prompt_tokens_local_compute += request.prompt_len - cached

    def record_finished(self, request: Request) -> None:
        """The per-request histograms vLLM fills from `FinishedRequestStats`.

        Requests aborted before their first token only count in `request_success{finished_reason="abort"}`:
        they have no phases to time.
        """
        assert request.finish_reason is not None and request.finished is not None
        self.request_success[request.finish_reason] += 1
        if request.first_scheduled is None or request.first_token is None:
            return
        finished = request.finished
        decode_time = finished - request.first_token
        self.e2e_request_latency.observe(finished - request.arrival)
        self.request_queue_time.observe(request.first_scheduled - request.enqueued)
        self.request_inference_time.observe(finished - request.first_scheduled)
        self.request_prefill_time.observe(request.first_token - request.first_scheduled)
        self.request_decode_time.observe(decode_time)
        # vLLM reports 0 for a single-token request rather than leaving it out (IterationStats).
        tpot = decode_time / (request.num_output - 1) if request.num_output > 1 else 0.0
        self.request_time_per_output_token.observe(tpot)
        self.request_prompt_tokens.observe(request.prompt_len)
        self.request_generation_tokens.observe(request.num_output)
        self.request_max_num_generation_tokens.observe(request.max_tokens)
        if request.max_tokens_param is not None:
            self.request_params_max_tokens.observe(request.max_tokens_param)
        self.request_params_n.observe(1)
        self.request_prefill_kv_computed_tokens.observe(request.prompt_len - request.num_cached_prompt_tokens)
        self.request_num_preemptions.observe(request.num_preemptions)
