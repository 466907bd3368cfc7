"""One small vLLM fleet, as scraped pages and as Prometheus series, for the saturation tests.

The same numbers feed the scrape source's arithmetic (`Snapshot`s) and a real PromQL engine
(promtool's `input_series`, or a Prometheus scraping exposition pages), so both renderings of
`vllm_saturation` can be compared on identical data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from adapter.sources.evaluation import Snapshot
from adapter.sources.page_parser import Labels, Page
from adapter.sources.snapshots import History
from adapter.vocabulary import vllm

T0 = 1_800_000_000.0
RUNNING = vllm.NUM_REQUESTS_RUNNING[0]
WAITING = vllm.NUM_REQUESTS_WAITING[0]
KV_NEW, KV_OLD = vllm.KV_CACHE_USAGE


@dataclass(frozen=True)
class Engine:
    """One engine (data-parallel rank) of a pod: its gauges."""

    model: str
    running: float
    waiting: float
    kv_usage: float
    old_kv_name: bool = False
    """Expose KV usage as vLLM <= 0.9.1 did (`gpu_cache_usage_perc`)."""

    def gauges(self) -> dict[str, float]:
        kv = KV_OLD if self.old_kv_name else KV_NEW
        return {RUNNING: self.running, WAITING: self.waiting, kv: self.kv_usage}


#: pod → engines. With capacity 10, kv_target 0.8, queue_target 4 the llama pods' terms are:
#: a: inflight 8/10 = 0.8, kv 0.4/0.8 = 0.5, queue 2/4 = 0.5            → 0.8 (inflight binds)
#: b: inflight 4/10 = 0.4, kv 0.76/0.8 = 0.95 (old name), queue 0        → 0.95 (KV binds)
#: c: inflight 12/10 = 1.2, kv mean(0.5, 0.7)/0.8 = 0.75, queue 6/4 = 1.5 → 1.5 (queue binds)
#: mean over the three llama pods: (0.8 + 0.95 + 1.5) / 3 = 1.0833...; qwen is another model.
FLEET: Mapping[str, tuple[Engine, ...]] = {
    "llama-a": (Engine("llama", 6, 2, 0.4),),
    "llama-b": (Engine("llama", 4, 0, 0.76, old_kv_name=True),),
    "llama-c": (Engine("llama", 3, 3, 0.5), Engine("llama", 3, 3, 0.7)),
    "qwen-a": (Engine("qwen", 30, 9, 0.99),),
}
NAMESPACE = "prod"


def engine_labels(engine: Engine, rank: int) -> Labels:
    return (("engine", str(rank)), ("model_name", engine.model))


def page(engines: tuple[Engine, ...]) -> Page:
    """The parsed `/metrics` of one pod."""
    parsed: Page = {}
    for rank, engine in enumerate(engines):
        for name, value in engine.gauges().items():
            parsed.setdefault(name, {})[engine_labels(engine, rank)] = value
    return parsed


def exposition(engines: tuple[Engine, ...]) -> str:
    """The same page in the text format a vLLM pod serves."""
    lines = []
    for name in (RUNNING, WAITING, KV_NEW, KV_OLD):
        for rank, engine in enumerate(engines):
            value = engine.gauges().get(name)
            if value is not None:
                labels = ",".join(f'{k}="{v}"' for k, v in engine_labels(engine, rank))
                lines.append(f"{name}{{{labels}}} {value!r}")
    return "\n".join(lines) + "\n"


def snapshots(fleet: Mapping[str, tuple[Engine, ...]] = FLEET) -> list[Snapshot]:
    """The fleet as the scrape source holds it: one snapshot per pod."""
    return [
        Snapshot({"namespace": NAMESPACE, "pod": pod}, T0, page(engines), History(0.0))
        for pod, engines in fleet.items()
    ]


def input_series(fleet: Mapping[str, tuple[Engine, ...]] = FLEET) -> list[dict[str, str]]:
    """The fleet as promtool `input_series`, labelled as Prometheus labels a scraped pod."""
    series = []
    for index, (pod, engines) in enumerate(fleet.items()):
        for rank, engine in enumerate(engines):
            labels = {"namespace": NAMESPACE, "pod": pod, "instance": f"10.0.0.{index}:8000"}
            labels.update(engine_labels(engine, rank))
            shown = ", ".join(f'{k}="{v}"' for k, v in labels.items())
            for name, value in engine.gauges().items():
                series.append({"series": f"{name}{{{shown}}}", "values": f"{value!r}x5"})
    return series
