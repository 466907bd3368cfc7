"""Writes vLLM's `/metrics` page for one emulated engine, through a `prometheus_client` registry.

`EngineCollector` reads the engine's plain statistics at scrape time and yields the families of
`vllm-metrics.md` §2.1 (`lab.emulator.families`) with vLLM's exact names, types, help texts, labels
and buckets; the library makes each family's samples (`_total`, `_created`, `le` formatting) exactly
as it does inside vLLM. Every series exists from the start (vLLM pre-creates its label children), so
each family is made by the library once and kept as a `FamilyLayout`: later scrapes hand it only the
values, and the page text is rewritten where they moved (`lab.emulator.exposition`).
`version="0.10"` emits the names from before the renames (`gpu_cache_usage_perc`,
`gpu_prefix_cache_*`, `time_per_output_token_seconds`) and leaves out the families added since, so
the adapter's aliases can be exercised; a real 0.10 also still showed the new KV-cache names beside
the old.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from typing import Final, cast

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, utils
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from adapter.vocabulary import vllm
from lab.emulator.engine import Engine
from lab.emulator.exposition import FamilyLayout
from lab.emulator.families import FAMILIES, EmittedFamily
from lab.emulator.stats import BucketCounts

#: what vLLM's `/metrics` route answers with (prometheus_client's own default has moved to 1.0.0)
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
VERSIONS: Final = (vllm.NEWEST_SUPPORTED, vllm.OLDEST_SUPPORTED)
# The library's own `le` formatting ("1.0", "+Inf", "1e+06"), so bucket labels match vLLM's byte for byte.
_le = cast(Callable[[float], str], utils.floatToGoString)


class EngineCollector(Collector):
    """The `vllm:` families of one engine, read at scrape time."""

    def __init__(
        self, engine: Engine, model_name: str, *, version: str = "0.33", engine_index: int = 0
    ) -> None:
        if version not in VERSIONS:
            raise ValueError(f"vllm version {version!r} must be one of {list(VERSIONS)}")
        self.engine = engine
        self.model_name = model_name
        self.version = version
        self.engine_index = str(engine_index)
        # vLLM creates its label children at start-up; their `_created` is that moment.
        self.created = time.time()
        #: family name -> (its series, the layout that writes its text)
        self._layouts: dict[str, tuple[object, FamilyLayout]] = {}

    def collect(self) -> Iterator[Metric]:
        for family in FAMILIES:
            if self.version != "0.33" and family.new_only:
                continue
            name, help_text = (
                family.old if self.version != "0.33" and family.old else (family.name, family.help)
            )
            yield self._render(family, name, help_text)
        yield self._cache_config_info()

    def _render(self, family: EmittedFamily, name: str, help_text: str) -> Metric:
        read = family.read(self.engine)
        # The layout holds while the family's series do (they are fixed: vLLM pre-creates them).
        series = (help_text, family.kind, family.labels, family.engine_label, tuple(read))
        return self._written(
            name, series, self._values(family.kind, read), lambda: self._build(family, name, help_text, read)
        )

    def _values(self, kind: str, read: dict[tuple[str, ...], float | BucketCounts]) -> list[float]:
        """The family's sample values in the order `_build`'s library families add them (`FamilyLayout`
        checks that order against the library's when it is built)."""
        out: list[float] = []
        for value in read.values():
            if isinstance(value, BucketCounts):
                cumulative = value.cumulative()
                out += cumulative
                # The library leaves `_count` and `_sum` out when the first bucket is negative.
                if not value.bounds or value.bounds[0] >= 0:
                    out += (cumulative[-1], value.total)
                out.append(self.created)
            elif kind == "counter":
                out += (float(value), self.created)
            else:
                out.append(float(value))
        return out

    def _written(self, name: str, series: object, values: list[float], build: Callable[[], Metric]) -> Metric:
        """The family `build` makes, from a layout kept across scrapes and rebuilt when `series` change."""
        last = self._layouts.get(name)
        if last is None or last[0] != series:
            last = self._layouts[name] = (series, FamilyLayout(build(), values))
        return last[1].written(values)

    def _build(
        self,
        family: EmittedFamily,
        name: str,
        help_text: str,
        read: dict[tuple[str, ...], float | BucketCounts],
    ) -> Metric:
        base = ("model_name", "engine") if family.engine_label else ("model_name",)
        prefix = (self.model_name, self.engine_index) if family.engine_label else (self.model_name,)
        labels = [*base, *family.labels]
        metric: Metric
        if family.kind == "counter":
            metric = CounterMetricFamily(name, help_text, labels=labels)
        elif family.kind == "gauge":
            metric = GaugeMetricFamily(name, help_text, labels=labels)
        else:
            metric = HistogramMetricFamily(name, help_text, labels=labels)
        for values, value in read.items():
            label_values = [*prefix, *values]
            if isinstance(value, BucketCounts):
                assert isinstance(metric, HistogramMetricFamily)
                metric.add_metric(
                    label_values, list(zip(_les(value.bounds), value.cumulative(), strict=True)), value.total
                )
                metric.add_sample(
                    name + "_created", dict(zip(labels, label_values, strict=True)), self.created
                )
            elif isinstance(metric, CounterMetricFamily):
                metric.add_metric(label_values, float(value), created=self.created)
            else:
                assert isinstance(metric, GaugeMetricFamily)
                metric.add_metric(label_values, float(value))
        return metric

    def _cache_config_info(self) -> Metric:
        labels = cache_config_labels(self.engine, self.version)
        labels["engine"] = self.engine_index

        def build() -> Metric:
            metric = GaugeMetricFamily(
                "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(labels)
            )
            metric.add_metric(list(labels.values()), 1.0)
            return metric

        return self._written("vllm:cache_config_info", labels, [1.0], build)


@functools.cache
def _les(bounds: tuple[float, ...]) -> tuple[str, ...]:
    """A histogram's `le` labels, formatted once per set of bounds (a page has a handful)."""
    return tuple(_le(b) for b in (*bounds, float("inf")))


def cache_config_labels(engine: Engine, version: str) -> dict[str, str]:
    """`str()` of each `CacheConfig` field, in declaration order (0.33.0, or the older 0.26.0 set)."""
    p = engine.params
    tokens = p.num_gpu_blocks * p.block_size
    known = {
        "block_size": str(p.block_size),
        "gpu_memory_utilization": str(p.gpu_memory_utilization),
        "enable_prefix_caching": str(p.enable_prefix_caching),
        "num_gpu_blocks": str(p.num_gpu_blocks),
        "kv_cache_size_tokens": str(tokens),
        "kv_cache_max_concurrency": str(tokens / p.max_model_len),
        "effective_attention_block_size": str(p.block_size),
        "hash_block_size": str(p.block_size),
        "user_specified_block_size": "False",
        "_block_size_resolved": "True",
        "prefix_caching_hash_algo": "sha256",
        "kv_cache_dtype_skip_layers": "[]",
        "kv_offloading_backend": "native",
        "cache_dtype": "auto",
        "mamba_cache_dtype": "auto",
        "mamba_ssm_cache_dtype": "auto",
        "mamba_cache_mode": "none",
    }
    names = _CACHE_CONFIG_033 if version == "0.33" else _CACHE_CONFIG_026
    return {
        name: known.get(name, "False" if name.startswith(_BOOLEAN_PREFIXES) else "None") for name in names
    }


_BOOLEAN_PREFIXES: Final = ("is_", "enable_", "use_", "kv_sharing", "swa_", "calculate_", "user_specified_")
# Word lists are the readable form of these label names.
_CACHE_CONFIG_033: Final = (  # noqa: SIM905
    "block_size user_specified_block_size kv_cache_layout prefix_match_unit gpu_memory_utilization "
    "cache_dtype "
    "is_attention_free num_gpu_blocks_override sliding_window enable_prefix_caching prefix_caching_hash_algo "
    "prefix_cache_retention_interval kv_cache_dtype_skip_layers mamba_page_size_padded skip_page_size_padded "
    "mamba_block_size mamba_cache_dtype mamba_ssm_cache_dtype mamba_cache_mode "
    "enable_mamba_shared_prefix_checkpoint "
    "replayssm_buffer_len use_replayssm use_kda_recoverssm num_gpu_blocks num_cpu_blocks "
    "simple_cpu_offload_num_blocks effective_attention_block_size kv_cache_size_tokens "
    "kv_cache_max_concurrency "
    "hash_block_size cache_hit_alignment_tokens kv_sharing_fast_prefill swa_bounded_replay "
    "kv_cache_memory_bytes "
    "kv_offloading_size kv_offloading_backend _block_size_resolved"
).split()
_CACHE_CONFIG_026: Final = (  # noqa: SIM905
    "block_size user_specified_block_size gpu_memory_utilization cache_dtype is_attention_free "
    "num_gpu_blocks_override sliding_window enable_prefix_caching prefix_caching_hash_algo "
    "calculate_kv_scales "
    "kv_cache_dtype_skip_layers mamba_page_size_padded user_specified_mamba_block_size mamba_block_size "
    "mamba_cache_dtype mamba_ssm_cache_dtype mamba_cache_mode num_gpu_blocks num_cpu_blocks "
    "kv_sharing_fast_prefill kv_cache_memory_bytes kv_offloading_size kv_offloading_backend "
    "_block_size_resolved "
    "kv_cache_size_tokens kv_cache_max_concurrency prefix_match_unit skip_page_size_padded"
).split()


def make_registry(collector: EngineCollector, *, process_metrics: bool = True) -> CollectorRegistry:
    """A registry like a single-API-server vLLM's: the engine's families plus `process_*`/`python_*`."""
    registry = CollectorRegistry(auto_describe=False)
    if process_metrics:
        GCCollector(registry=registry)
        PlatformCollector(registry=registry)
        ProcessCollector(registry=registry)
    registry.register(collector)
    return registry
