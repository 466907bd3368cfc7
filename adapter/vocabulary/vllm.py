"""The parts of vLLM's `/metrics` contract this project depends on (see shared/vllm-metrics.md).

Names, version aliases and histogram bucket boundaries live here once: the catalogue, the scrape
source, the emulator, the alerts and the dashboards all read them from this module.
"""

from __future__ import annotations

import functools
import re
from typing import Final

# A family's names, newest first: older vLLM releases exposed the same quantity under the later names.
# A member may fix labels, `name{label="value"}`: it reads only that name's series with those values,
# and stands for the later names' series with those labels dropped (a breakdown preferred to its total).
Family = tuple[str, ...]

_MEMBER: Final = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?")
_FIXED: Final = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"\s*(?:,|$)')


def member_name(member: str) -> str:
    """The series name of a family member: `vllm:x` of `vllm:x{reason="capacity"}`."""
    return split_member(member)[0]


def family_name(family: Family) -> str:
    """The name a family is called by in messages and gap reports: its first plain (label-free) name,
    the series every release of the range exposes (`vllm:num_requests_waiting`, not its breakdown)."""
    for member in family:
        name, fixed = split_member(member)
        if not fixed:
            return name
    return member_name(family[0])


@functools.cache
def split_member(member: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """`(name, fixed labels)` of a family member; `ValueError` for one this module could not have written."""
    match = _MEMBER.fullmatch(member)
    if match is None:
        raise ValueError(f'family member {member!r} must be a name or name{{label="value", ...}}')
    text = match.group("labels") or ""
    fixed = tuple((m.group(1), m.group(2)) for m in _FIXED.finditer(text))
    if text.strip() and not fixed:
        raise ValueError(f'family member {member!r} must be a name or name{{label="value", ...}}')
    return match.group("name"), fixed


#: The vLLM releases (minor versions) whose `/metrics` this module describes: names are read from the
#: newest one's source, and the aliases reach back to the oldest. The emulator emits exactly these two,
#: and the chart's default image lies between them (tests/test_vllm_versions.py).
OLDEST_SUPPORTED: Final = "0.10"
NEWEST_SUPPORTED: Final = "0.33"


def minor(version: str) -> tuple[int, int]:
    """`(0, 33)` from `0.33`, `0.33.0`, `v0.33.1` or `0.33.0rc1`."""
    parts = version.lstrip("v").split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def supported(version: str) -> bool:
    """Whether a vLLM release's metrics are covered by the names and aliases here."""
    return minor(OLDEST_SUPPORTED) <= minor(version) <= minor(NEWEST_SUPPORTED)


NUM_REQUESTS_RUNNING: Final[Family] = ("vllm:num_requests_running",)
NUM_REQUESTS_WAITING: Final[Family] = ("vllm:num_requests_waiting",)
# kv_cache_usage_perc replaced gpu_cache_usage_perc in 0.9.2; the old name was removed in 0.12 (PR #29330).
KV_CACHE_USAGE: Final[Family] = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
# request_time_per_output_token_seconds (PR #24015) is the true per-request TPOT; releases before 0.11
# only had time_per_output_token_seconds (per output event), the best an old fleet can offer.
TPOT: Final[Family] = ("vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds")
ITL: Final[Family] = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
TTFT: Final[Family] = ("vllm:time_to_first_token_seconds",)
E2E_LATENCY: Final[Family] = ("vllm:e2e_request_latency_seconds",)
QUEUE_TIME: Final[Family] = ("vllm:request_queue_time_seconds",)
NUM_PREEMPTIONS: Final[Family] = ("vllm:num_preemptions_total",)
PROMPT_TOKENS: Final[Family] = ("vllm:prompt_tokens_total",)
PROMPT_TOKENS_CACHED: Final[Family] = ("vllm:prompt_tokens_cached_total",)
# Prompt tokens by where they came from, `source` = local_compute, local_cache_hit, external_kv_transfer
# (PR #33290): on a decode engine of a P/D pair the KV received from the prefill engine.
PROMPT_TOKENS_BY_SOURCE: Final[Family] = ("vllm:prompt_tokens_by_source_total",)
GENERATION_TOKENS: Final[Family] = ("vllm:generation_tokens_total",)
REQUEST_SUCCESS: Final[Family] = ("vllm:request_success_total",)
ADMISSION_REJECTIONS: Final[Family] = ("vllm:admission_rejections_total",)
# The capacity/deferred split of num_requests_waiting (PR #38435); absent before 2026 releases.
WAITING_BY_REASON: Final[Family] = ("vllm:num_requests_waiting_by_reason",)
#: the `reason` of `WAITING_BY_REASON` that more replicas serve: requests waiting for scheduling
#: capacity (the other, "deferred", waits for a LoRA slot, a KV transfer or a blocked status)
CAPACITY_REASON: Final = "capacity"


def with_breakdown(breakdown: Family, labels: tuple[tuple[str, str], ...], total: Family) -> Family:
    """A family reading `breakdown`'s series with `labels` where a server has them, else `total`.

    Called where the family is used (not here at import), so that a renamed name reaches it."""
    fixed = ", ".join(f'{key}="{value}"' for key, value in labels)
    return (*(f"{name}{{{fixed}}}" for name in breakdown), *total)


PREFILL_TIME: Final[Family] = ("vllm:request_prefill_time_seconds",)
# Prompt tokens a finished request computed itself, without prefix-cache hits or KV received from a
# prefill engine (PR #30189, 2025-12); older releases only have every prompt token, an upper bound.
PREFILL_COMPUTED_TOKENS: Final[Family] = (
    "vllm:request_prefill_kv_computed_tokens",
    "vllm:request_prompt_tokens",
)
# Requests a KV-transfer consumer (a decode engine of a P/D pair) is handing over, by `stage`; only an
# engine whose `--kv-transfer-config` makes it a consumer exports it (vllm-metrics.md §2.2).
KV_FETCH_BY_STAGE: Final[Family] = ("vllm:num_requests_kv_fetch_by_stage",)
#: the `stage` values of `KV_FETCH_BY_STAGE`, in the order a request passes them
KV_FETCH_STAGES: Final = ("waiting_to_start", "in_progress", "completed_waiting")
# NixlConnector's own metrics (`--kv-transfer-config` with NixlConnector; vllm-metrics.md §2.2 names
# only the family): these members were read on a real vLLM 0.26.0 pair (H200s, NIXL 1.5.1,
# tests/data/vllm-0.26.0-nixl-decode.prom). Transfers fail and expire on different sides: failed
# transfers and notifications on the engine pulling the KV (decode), expired KV on the prefill engine.
NIXL_FAILED_TRANSFERS: Final[Family] = ("vllm:nixl_num_failed_transfers_total",)
NIXL_FAILED_NOTIFICATIONS: Final[Family] = ("vllm:nixl_num_failed_notifications_total",)
NIXL_KV_EXPIRED: Final[Family] = ("vllm:nixl_num_kv_expired_reqs_total",)
NIXL_TRANSFER_TIME: Final[Family] = ("vllm:nixl_xfer_time_seconds",)
DECODE_TIME: Final[Family] = ("vllm:request_decode_time_seconds",)
# Labels are every CacheConfig field and change between releases: select only num_gpu_blocks,
# block_size and the like, and always aggregate.
CACHE_CONFIG_INFO: Final[Family] = ("vllm:cache_config_info",)

# Labels every engine metric carries; `engine` is the data-parallel rank and is always aggregated away.
MODEL_LABEL: Final = "model_name"
ENGINE_LABEL: Final = "engine"

# Histogram bucket families, exact upper bounds (vllm/v1/metrics/buckets.py); +Inf is implicit.
REQUEST_LATENCY_BUCKETS: Final = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
TTFT_BUCKETS: Final = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
INTER_TOKEN_LATENCY_BUCKETS: Final = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
ITERATION_TOKENS_BUCKETS: Final = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
REQUEST_PARAMS_N_BUCKETS: Final = (1, 2, 5, 10, 20)
REQUEST_NUM_PREEMPTIONS_BUCKETS: Final = (1, 2, 3, 4, 5, 10, 20)


def request_tokens_buckets(max_model_len: int) -> tuple[int, ...]:
    """The `request_tokens` family: the 1-2-5 series kept while it does not exceed `max_model_len`."""
    bounds: list[int] = []
    mantissas = (1, 2, 5)
    exponent = 0
    while True:
        for mantissa in mantissas:
            bound = mantissa * 10**exponent
            if bound > max_model_len:
                return tuple(bounds)
            bounds.append(bound)
        exponent += 1
