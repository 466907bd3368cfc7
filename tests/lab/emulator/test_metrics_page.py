"""The page `lab.emulator.metrics_page` writes, against vLLM's contract (vllm-metrics.md §2.1,
adapter/vocabulary/vllm.py) and a real vLLM 0.26 page (tests/data/metrics-idle.prom), family by family."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from adapter.vocabulary import vllm
from lab.emulator.engine import Engine
from lab.emulator.metrics_page import CONTENT_TYPE, EngineCollector, cache_config_labels, make_registry
from lab.emulator.params import EngineParams

IDLE = (Path(__file__).parents[2] / "data" / "metrics-idle.prom").read_text()
LATENCY, TTFT, ITL = vllm.REQUEST_LATENCY_BUCKETS, vllm.TTFT_BUCKETS, vllm.INTER_TOKEN_LATENCY_BUCKETS
TOKENS = vllm.request_tokens_buckets(4096)

# §2.1: exposition family name (counters without `_total`, as the parser names them),
# type, extra labels, buckets.
CONTRACT: dict[str, tuple[str, tuple[str, ...], tuple[float, ...] | None]] = {
    "vllm:num_requests_running": ("gauge", (), None),
    "vllm:num_requests_waiting": ("gauge", (), None),
    "vllm:num_requests_waiting_by_reason": ("gauge", ("reason",), None),
    "vllm:engine_sleep_state": ("gauge", ("sleep_state",), None),
    "vllm:kv_cache_usage_perc": ("gauge", (), None),
    "vllm:prefix_cache_queries": ("counter", (), None),
    "vllm:prefix_cache_hits": ("counter", (), None),
    "vllm:external_prefix_cache_queries": ("counter", (), None),
    "vllm:external_prefix_cache_hits": ("counter", (), None),
    "vllm:mm_cache_queries": ("counter", (), None),
    "vllm:mm_cache_hits": ("counter", (), None),
    "vllm:num_preemptions": ("counter", (), None),
    "vllm:prompt_tokens": ("counter", (), None),
    "vllm:prompt_tokens_by_source": ("counter", ("source",), None),
    "vllm:prompt_tokens_cached": ("counter", (), None),
    "vllm:prompt_tokens_cached_by_source": ("counter", ("source",), None),
    "vllm:generation_tokens": ("counter", (), None),
    "vllm:request_success": ("counter", ("finished_reason",), None),
    "vllm:admission_rejections": ("counter", ("reason",), None),
    "vllm:request_prompt_tokens": ("histogram", (), TOKENS),
    "vllm:request_generation_tokens": ("histogram", (), TOKENS),
    "vllm:iteration_tokens_total": ("histogram", (), vllm.ITERATION_TOKENS_BUCKETS),
    "vllm:request_max_num_generation_tokens": ("histogram", (), TOKENS),
    "vllm:request_params_n": ("histogram", (), vllm.REQUEST_PARAMS_N_BUCKETS),
    "vllm:request_params_max_tokens": ("histogram", (), TOKENS),
    "vllm:time_to_first_token_seconds": ("histogram", (), TTFT),
    "vllm:inter_token_latency_seconds": ("histogram", (), ITL),
    "vllm:request_time_per_output_token_seconds": ("histogram", (), ITL),
    "vllm:e2e_request_latency_seconds": ("histogram", (), LATENCY),
    "vllm:request_queue_time_seconds": ("histogram", (), LATENCY),
    "vllm:request_inference_time_seconds": ("histogram", (), LATENCY),
    "vllm:request_prefill_time_seconds": ("histogram", (), LATENCY),
    "vllm:request_decode_time_seconds": ("histogram", (), LATENCY),
    "vllm:request_num_preemptions": ("histogram", (), vllm.REQUEST_NUM_PREEMPTIONS_BUCKETS),
    "vllm:request_prefill_kv_computed_tokens": ("histogram", (), TOKENS),
    "vllm:estimated_flops_per_gpu": ("counter", (), None),
    "vllm:estimated_read_bytes_per_gpu": ("counter", (), None),
    "vllm:estimated_write_bytes_per_gpu": ("counter", (), None),
    "vllm:cache_config_info": ("gauge", (), None),
}
# Help texts of the §2.1 families the 0.26 capture predates (the others are compared with the capture).
NEWER_HELP = {
    "vllm:admission_rejections": "Number of admission attempts rejected by a queue limit, by reason.",
    "vllm:request_num_preemptions": "Histogram of the number of times a request was preempted.",
    "vllm:prompt_tokens_cached_by_source": (
        "Prefix-cache hit tokens by the cache tier that "
        "supplied them: device (local HBM), host (offloaded to "
        "DRAM), disk, p2p (transferred from another vLLM "
        "instance) or external_unspecified. Counted at admission; "
        "sums to vllm:prefix_cache_hits + vllm:external_prefix_cache_hits."
    ),
}


def _families(text: str) -> dict[str, Metric]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def _page(engine: Engine | None = None, version: str = "0.33", model: str = "llama-1b-dummy") -> str:
    engine = engine or Engine(EngineParams())
    return generate_latest(make_registry(EngineCollector(engine, model, version=version))).decode()


def _label_names(family: Metric) -> set[str]:
    return {name for sample in family.samples for name in sample.labels} - {"le"}


def _bounds(family: Metric) -> tuple[float, ...]:
    bounds = {float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")}
    assert float("inf") in bounds
    return tuple(sorted(bounds - {float("inf")}))


@pytest.fixture(scope="module")
def emulated() -> dict[str, Metric]:
    return _families(_page())


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_every_core_family_has_its_contract_type_labels_and_buckets(
    emulated: dict[str, Metric], name: str
) -> None:
    """Each §2.1 family is exposed with its type, `model_name`/`engine` plus its own labels, and the
    bucket boundaries of adapter/vocabulary/vllm.py."""
    kind, extra, buckets = CONTRACT[name]
    family = emulated[name]
    assert family.type == kind
    labels = _label_names(family)
    if name == "vllm:cache_config_info":
        assert "engine" in labels and "model_name" not in labels
    elif name == "vllm:admission_rejections":
        assert labels == {"model_name", *extra}, "admission_rejections has no engine label"
    else:
        assert labels == {"model_name", "engine", *extra}
    if buckets is not None:
        assert _bounds(family) == tuple(float(b) for b in buckets)


def test_no_family_beyond_the_contract(emulated: dict[str, Metric]) -> None:
    """Every `vllm:` family emitted is in §2.1 (or is the `_created` companion of one)."""
    extra = {name for name in emulated if name.startswith("vllm:") and not name.endswith("_created")} - set(
        CONTRACT
    )
    assert extra == set()


def test_families_shared_with_a_real_server_match_it(emulated: dict[str, Metric]) -> None:
    """For every `vllm:` family a real 0.26 server also exposed: same type, help text, label names
    and bucket boundaries (cache_config_info: its label set changes per release; see its own test)."""
    real = {name: f for name, f in _families(IDLE).items() if name.startswith("vllm:")}
    shared = sorted(set(real) & set(emulated))
    assert len(shared) >= 60, "most families (with their _created companions) exist in both"
    for name in shared:
        mine, theirs = emulated[name], real[name]
        assert (mine.type, mine.documentation) == (theirs.type, theirs.documentation), name
        if name != "vllm:cache_config_info":
            assert _label_names(mine) == _label_names(theirs), name
        if mine.type == "histogram":
            assert _bounds(mine) == _bounds(theirs), name
    only_real = {n for n in set(real) - set(emulated) if not n.startswith("vllm:kv_block_")}
    assert only_real == set(), "only the opt-in --kv-cache-metrics histograms may be missing"


@pytest.mark.parametrize("name", sorted(NEWER_HELP))
def test_help_of_families_newer_than_the_capture(emulated: dict[str, Metric], name: str) -> None:
    """Families added after 0.26 carry the 0.33 help text verbatim."""
    assert emulated[name].documentation == NEWER_HELP[name]


def test_counters_and_histograms_have_created_series_gauges_do_not(emulated: dict[str, Metric]) -> None:
    """As from a single API server: a `<name>_created` gauge per counter and histogram child."""
    for name, family in emulated.items():
        if not name.startswith("vllm:") or name.endswith("_created"):
            continue
        created = emulated.get(f"{name}_created")
        if family.type in ("counter", "histogram"):
            assert created is not None and created.type == "gauge", name
            assert len(created.samples) == len(
                {
                    tuple(sorted(s.labels.items()))
                    for s in family.samples
                    if s.name.endswith(("_total", "_count"))
                }
            ), name
        else:
            assert created is None, name


def test_every_series_exists_at_start_with_zero(emulated: dict[str, Metric]) -> None:
    """Label children are pre-created: every finished_reason, source, reason and sleep_state value
    is there before any traffic, with 0 (sleep_state awake: 1; cache_config_info: 1)."""
    success = {s.labels["finished_reason"]: s.value for s in emulated["vllm:request_success"].samples}
    assert success == dict.fromkeys(["stop", "length", "abort", "error", "repetition"], 0.0)
    sleep = {s.labels["sleep_state"]: s.value for s in emulated["vllm:engine_sleep_state"].samples}
    assert sleep == {"awake": 1.0, "weights_offloaded": 0.0, "discard_all": 0.0}
    for name, family in emulated.items():
        if (
            name.startswith("vllm:")
            and not name.endswith("_created")
            and name not in ("vllm:engine_sleep_state", "vllm:cache_config_info")
        ):
            assert all(s.value == 0 for s in family.samples), name


def test_wire_format_matches_the_real_server_line_by_line() -> None:
    """Counter `_total`, float `le` labels and sorted label order appear exactly as vLLM writes them."""
    text = _page()
    for line in (
        'vllm:iteration_tokens_total_bucket{engine="0",le="16384.0",model_name="llama-1b-dummy"} 0.0',
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="llama-1b-dummy"} 0.0',
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="llama-1b-dummy"} 0.0',
        "# TYPE vllm:prompt_tokens_created gauge",
    ):
        assert line in text
        assert line.split(" ")[0] in IDLE
    assert CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"


@pytest.mark.parametrize(
    ("max_model_len", "last"),
    [
        pytest.param(4096, 2000, id="4k context"),
        pytest.param(8192, 5000, id="8k"),
        pytest.param(32768, 20000, id="32k"),
    ],
)
def test_request_token_buckets_follow_max_model_len(max_model_len: int, last: int) -> None:
    """The request_tokens family is the 1-2-5 series up to max_model_len (vllm-metrics.md §2.4)."""
    params = EngineParams(max_model_len=max_model_len, num_gpu_blocks=max_model_len // 16)
    family = _families(_page(Engine(params)))["vllm:request_prompt_tokens"]
    assert _bounds(family)[-1] == last
    assert _bounds(family) == tuple(float(b) for b in vllm.request_tokens_buckets(max_model_len))


def test_cache_config_info_describes_the_kv_cache(emulated: dict[str, Metric]) -> None:
    """Value 1; the labels queries may rely on carry the pool's size; 0.33's label set is complete."""
    (sample,) = emulated["vllm:cache_config_info"].samples
    assert sample.value == 1.0
    assert {
        k: sample.labels[k]
        for k in (
            "num_gpu_blocks",
            "block_size",
            "kv_cache_size_tokens",
            "kv_cache_max_concurrency",
            "gpu_memory_utilization",
        )
    } == {
        "num_gpu_blocks": "2048",
        "block_size": "16",
        "kv_cache_size_tokens": "32768",
        "kv_cache_max_concurrency": "8.0",
        "gpu_memory_utilization": "0.92",
    }
    assert len(sample.labels) == 38, "37 CacheConfig fields of 0.33.0 plus engine"
    real = next(f for f in text_string_to_metric_families(IDLE) if f.name == "vllm:cache_config_info")
    assert set(cache_config_labels(Engine(EngineParams()), "0.10")) | {"engine"} == set(
        real.samples[0].labels
    )


def test_values_follow_the_engine() -> None:
    """Gauges read the engine's state and counters its statistics at scrape time."""
    engine = Engine(EngineParams(eos_probability=0.0))
    for _ in range(40):
        engine.submit(1000, 50)
    engine.run_until(0.1)
    families = _families(_page(engine))
    value = {
        name: families[name].samples[0].value
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")
    }
    assert value == {
        "vllm:num_requests_running": len(engine.running),
        "vllm:num_requests_waiting": len(engine.waiting),
        "vllm:kv_cache_usage_perc": engine.kv.usage,
    }
    assert min(value.values()) > 0, "the check needs requests both running and waiting"
    engine.run_until(10)
    families = _families(_page(engine))
    tokens = next(s for s in families["vllm:generation_tokens"].samples if s.name.endswith("_total"))
    assert tokens.value == 40 * 50 == engine.stats.generation_tokens
    count = next(s for s in families["vllm:e2e_request_latency_seconds"].samples if s.name.endswith("_count"))
    assert count.value == 40


@pytest.mark.parametrize(
    ("api_family", "old_name"),
    [
        pytest.param(vllm.KV_CACHE_USAGE, "vllm:gpu_cache_usage_perc", id="kv cache usage"),
        pytest.param(vllm.TPOT, "vllm:time_per_output_token_seconds", id="tpot"),
        pytest.param(vllm.ITL, "vllm:time_per_output_token_seconds", id="itl"),
    ],
)
def test_old_naming_exercises_the_adapter_aliases(api_family: vllm.Family, old_name: str) -> None:
    """With version 0.10 the renamed families appear only under their old names, which are the
    aliases adapter/vocabulary/vllm.py lists after the new ones; 0.33 shows only the new names."""

    def names(text: str) -> set[str]:
        return set(re.findall(r"^# TYPE (\S+)", text, re.MULTILINE))

    old = _page(version="0.10")
    new = _page()
    assert old_name in names(old) and old_name in api_family[1:]
    assert api_family[0] not in names(old) and api_family[0].removesuffix("_total") not in names(old)
    assert api_family[0] in names(new) and old_name not in names(new)


def test_old_naming_drops_families_added_since() -> None:
    """Version 0.10 has neither the 2026 families nor the new prefix-cache names."""
    families = _families(_page(version="0.10"))
    for absent in (
        "vllm:num_requests_waiting_by_reason",
        "vllm:prompt_tokens_by_source",
        "vllm:prefix_cache_queries",
    ):
        assert absent not in families
    assert families["vllm:gpu_prefix_cache_queries"].type == "counter"
    assert families["vllm:num_requests_running"].type == "gauge"


def test_unknown_version_is_refused() -> None:
    """Only the namings the emulator knows can be chosen."""
    with pytest.raises(ValueError, match=r"vllm version '0.5' must be one of \['0.33', '0.10'\]"):
        EngineCollector(Engine(EngineParams()), "m", version="0.5")


def test_process_and_python_collectors_are_present_like_a_single_api_server() -> None:
    """A single-API-server vLLM also exposes process_* and python_* (vllm-metrics.md §2.3)."""
    families = _families(_page())
    assert "process_cpu_seconds" in families and "python_info" in families
