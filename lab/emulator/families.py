"""The families of vLLM's `/metrics` page, as data: name, type, help text, labels, and how each is read
from an emulated engine (`vllm-metrics.md` §2.1, in the order a real 0.26 server lists them).

`old` is a family's (name, help) before a rename and `new_only` marks later additions, so that
`lab.emulator.metrics_page` can write the page of an older vLLM too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from adapter.vocabulary import vllm
from lab.emulator.engine import Engine
from lab.emulator.stats import FINISH_REASONS, REJECTION_REASONS, BucketCounts

Kind = Literal["counter", "gauge", "histogram"]
# Values of one family: label values (after model_name, engine) -> number or histogram.
Reader = Callable[[Engine], dict[tuple[str, ...], "float | BucketCounts"]]


@dataclass(frozen=True)
class EmittedFamily:
    """One family the page emits and how to read its values from the engine; `old` is its (name, help)
    before a rename, `new_only` marks later additions."""

    name: str
    kind: Kind
    help: str
    read: Reader
    labels: tuple[str, ...] = ()
    old: tuple[str, str] | None = None
    new_only: bool = False
    engine_label: bool = True


def _one(read: Callable[[Engine], float | BucketCounts]) -> Reader:
    return lambda engine: {(): read(engine)}


def _zero(engine: Engine) -> float:
    return 0.0


_MFU = "(for Model Flops Utilization calculations)."
_PREFIX = "in terms of number of"
_EXTERNAL = (
    "External prefix cache {} from KV connector cross-instance cache sharing, in terms of number of "
    "{} tokens."
)
_WAITING_BY_REASON = (
    "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
    "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all "
    "reasons equals vllm:num_requests_waiting."
)
_SLEEP = (
    "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
    "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."
)
_CACHED_BY_SOURCE = (
    "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host (offloaded to "
    "DRAM), disk, p2p (transferred from another vLLM instance) or external_unspecified. Counted at "
    "admission; sums to vllm:prefix_cache_hits + vllm:external_prefix_cache_hits."
)
_CACHE_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")


def _waiting(engine: Engine) -> float:
    # Requests still in the front-end (tokenizing) are not in the engine's queue yet, as in vLLM.
    return float(len(engine.waiting))


# In the order a real 0.26 server lists them (data/vllm-0.26.0/metrics-idle.prom); newer ones where
# they belong.
FAMILIES: Final[tuple[EmittedFamily, ...]] = (
    EmittedFamily(
        "vllm:estimated_flops_per_gpu_total",
        "counter",
        f"Estimated number of floating point operations per GPU {_MFU}",
        _one(_zero),
        new_only=True,
    ),
    EmittedFamily(
        "vllm:estimated_read_bytes_per_gpu_total",
        "counter",
        f"Estimated number of bytes read from memory per GPU {_MFU}",
        _one(_zero),
        new_only=True,
    ),
    EmittedFamily(
        "vllm:estimated_write_bytes_per_gpu_total",
        "counter",
        f"Estimated number of bytes written to memory per GPU {_MFU}",
        _one(_zero),
        new_only=True,
    ),
    EmittedFamily(
        vllm.NUM_REQUESTS_RUNNING[0],
        "gauge",
        "Number of requests in model execution batches.",
        _one(lambda e: len(e.running)),
    ),
    EmittedFamily(
        vllm.NUM_REQUESTS_WAITING[0], "gauge", "Number of requests waiting to be processed.", _one(_waiting)
    ),
    EmittedFamily(
        "vllm:num_requests_waiting_by_reason",
        "gauge",
        _WAITING_BY_REASON,
        lambda e: {("capacity",): _waiting(e), ("deferred",): 0.0},
        ("reason",),
        new_only=True,
    ),
    EmittedFamily(
        "vllm:engine_sleep_state",
        "gauge",
        _SLEEP,
        lambda e: {("awake",): 1.0, ("weights_offloaded",): 0.0, ("discard_all",): 0.0},
        ("sleep_state",),
        new_only=True,
    ),
    EmittedFamily(
        vllm.KV_CACHE_USAGE[0],
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        _one(lambda e: e.kv.usage),
        old=(vllm.KV_CACHE_USAGE[1], "GPU KV-cache usage. 1 means 100 percent usage."),
    ),
    EmittedFamily(
        "vllm:prefix_cache_queries_total",
        "counter",
        f"Prefix cache queries, {_PREFIX} queried tokens.",
        _one(lambda e: e.stats.prefix_cache_queries),
        old=("vllm:gpu_prefix_cache_queries_total", f"GPU prefix cache queries, {_PREFIX} queried tokens."),
    ),
    EmittedFamily(
        "vllm:prefix_cache_hits_total",
        "counter",
        f"Prefix cache hits, {_PREFIX} cached tokens.",
        _one(lambda e: e.stats.prefix_cache_hits),
        old=("vllm:gpu_prefix_cache_hits_total", f"GPU prefix cache hits, {_PREFIX} cached tokens."),
    ),
    EmittedFamily(
        "vllm:external_prefix_cache_queries_total",
        "counter",
        _EXTERNAL.format("queries", "queried"),
        _one(_zero),
        new_only=True,
    ),
    EmittedFamily(
        "vllm:external_prefix_cache_hits_total",
        "counter",
        _EXTERNAL.format("hits", "cached"),
        _one(_zero),
        new_only=True,
    ),
    EmittedFamily(
        "vllm:mm_cache_queries_total",
        "counter",
        f"Multi-modal cache queries, {_PREFIX} queried items.",
        _one(_zero),
        new_only=True,
    ),
    EmittedFamily(
        "vllm:mm_cache_hits_total",
        "counter",
        f"Multi-modal cache hits, {_PREFIX} cached items.",
        _one(_zero),
        new_only=True,
    ),
    EmittedFamily(
        vllm.NUM_PREEMPTIONS[0],
        "counter",
        "Cumulative number of preemption from the engine.",
        _one(lambda e: e.stats.num_preemptions),
    ),
    EmittedFamily(
        vllm.PROMPT_TOKENS[0],
        "counter",
        "Number of prefill tokens processed.",
        _one(lambda e: e.stats.prompt_tokens),
    ),
    EmittedFamily(
        "vllm:prompt_tokens_by_source_total",
        "counter",
        "Number of prompt tokens by source.",
        lambda e: {
            ("local_compute",): e.stats.prompt_tokens_local_compute,
            ("local_cache_hit",): e.stats.prompt_tokens_local_cache_hit,
            ("external_kv_transfer",): 0.0,
        },
        ("source",),
        new_only=True,
    ),
    EmittedFamily(
        vllm.PROMPT_TOKENS_CACHED[0],
        "counter",
        "Number of cached prompt tokens (local + external).",
        _one(lambda e: e.stats.prompt_tokens_local_cache_hit),
        new_only=True,
    ),
    EmittedFamily(
        "vllm:prompt_tokens_cached_by_source_total",
        "counter",
        _CACHED_BY_SOURCE,
        lambda e: {
            (s,): float(e.stats.prompt_tokens_local_cache_hit if s == "device" else 0) for s in _CACHE_SOURCES
        },
        ("source",),
        new_only=True,
    ),
    EmittedFamily(
        vllm.GENERATION_TOKENS[0],
        "counter",
        "Number of generation tokens processed.",
        _one(lambda e: e.stats.generation_tokens),
    ),
    EmittedFamily(
        vllm.REQUEST_SUCCESS[0],
        "counter",
        "Count of successfully processed requests.",
        lambda e: {(r,): e.stats.request_success[r] for r in FINISH_REASONS},
        ("finished_reason",),
    ),
    EmittedFamily(
        vllm.ADMISSION_REJECTIONS[0],
        "counter",
        "Number of admission attempts rejected by a queue limit, by reason.",
        lambda e: {(r,): e.stats.admission_rejections[r] for r in REJECTION_REASONS},
        ("reason",),
        new_only=True,
        engine_label=False,
    ),
    EmittedFamily(
        "vllm:request_prompt_tokens",
        "histogram",
        "Number of prefill tokens processed.",
        _one(lambda e: e.stats.request_prompt_tokens),
    ),
    EmittedFamily(
        "vllm:request_generation_tokens",
        "histogram",
        "Number of generation tokens processed.",
        _one(lambda e: e.stats.request_generation_tokens),
    ),
    EmittedFamily(
        "vllm:iteration_tokens_total",
        "histogram",
        "Histogram of number of tokens per engine_step.",
        _one(lambda e: e.stats.iteration_tokens),
    ),
    EmittedFamily(
        "vllm:request_max_num_generation_tokens",
        "histogram",
        "Histogram of maximum number of requested generation tokens.",
        _one(lambda e: e.stats.request_max_num_generation_tokens),
    ),
    EmittedFamily(
        "vllm:request_params_n",
        "histogram",
        "Histogram of the n request parameter.",
        _one(lambda e: e.stats.request_params_n),
    ),
    EmittedFamily(
        "vllm:request_params_max_tokens",
        "histogram",
        "Histogram of the max_tokens request parameter.",
        _one(lambda e: e.stats.request_params_max_tokens),
    ),
    EmittedFamily(
        vllm.TTFT[0],
        "histogram",
        "Histogram of time to first token in seconds.",
        _one(lambda e: e.stats.time_to_first_token),
    ),
    EmittedFamily(
        vllm.ITL[0],
        "histogram",
        "Histogram of inter-token latency in seconds.",
        _one(lambda e: e.stats.inter_token_latency),
        old=(vllm.ITL[1], "Histogram of time per output token in seconds."),
    ),
    EmittedFamily(
        vllm.TPOT[0],
        "histogram",
        "Histogram of time_per_output_token_seconds per request.",
        _one(lambda e: e.stats.request_time_per_output_token),
        new_only=True,
    ),
    EmittedFamily(
        vllm.E2E_LATENCY[0],
        "histogram",
        "Histogram of e2e request latency in seconds.",
        _one(lambda e: e.stats.e2e_request_latency),
    ),
    EmittedFamily(
        vllm.QUEUE_TIME[0],
        "histogram",
        "Histogram of time spent in WAITING phase for request.",
        _one(lambda e: e.stats.request_queue_time),
    ),
    EmittedFamily(
        "vllm:request_inference_time_seconds",
        "histogram",
        "Histogram of time spent in RUNNING phase for request.",
        _one(lambda e: e.stats.request_inference_time),
    ),
    EmittedFamily(
        "vllm:request_prefill_time_seconds",
        "histogram",
        "Histogram of time spent in PREFILL phase for request.",
        _one(lambda e: e.stats.request_prefill_time),
    ),
    EmittedFamily(
        "vllm:request_decode_time_seconds",
        "histogram",
        "Histogram of time spent in DECODE phase for request.",
        _one(lambda e: e.stats.request_decode_time),
    ),
    EmittedFamily(
        "vllm:request_num_preemptions",
        "histogram",
        "Histogram of the number of times a request was preempted.",
        _one(lambda e: e.stats.request_num_preemptions),
        new_only=True,
    ),
    EmittedFamily(
        "vllm:request_prefill_kv_computed_tokens",
        "histogram",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        _one(lambda e: e.stats.request_prefill_kv_computed_tokens),
        new_only=True,
    ),
)
