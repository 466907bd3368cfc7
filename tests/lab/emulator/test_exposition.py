"""`PageWriter` writes what `prometheus_client.generate_latest` writes, byte for byte, scrape after
scrape: the library is the reference (it is what vLLM serves its page with), so every test compares
the two on the same registry at the same instant."""

from __future__ import annotations

import gc

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest

from lab.emulator.engine import Engine
from lab.emulator.exposition import PageWriter
from lab.emulator.metrics_page import VERSIONS, EngineCollector, make_registry
from lab.emulator.params import EngineParams


@pytest.mark.parametrize("version", VERSIONS)
def test_an_engine_page_is_the_librarys_in_every_state_it_passes(version: str) -> None:
    """Idle, queueing, preempting, draining: the page changes values, never series, and the writer
    (reused, as a replica reuses it) follows each change."""
    engine = Engine(EngineParams(num_gpu_blocks=64, max_num_seqs=8, max_model_len=1024), seed=3)
    registry = make_registry(EngineCollector(engine, "m", version=version), process_metrics=False)
    writer = PageWriter(registry)
    pages = set()
    for t, arrivals in [(0.0, 0), (0.2, 30), (1.0, 10), (3.0, 0), (30.0, 5), (300.0, 0)]:
        for i in range(arrivals):
            engine.submit(200 + 13 * i, 40 + i)
        engine.run_until(t)
        expected = generate_latest(registry)
        assert writer.page() == expected, f"at t={t}"
        pages.add(expected)
    assert len(pages) >= 5, "the states must differ for the comparison to mean anything"
    assert engine.stats.num_preemptions > 0, "the states must include preemption"


def test_every_kind_of_family_and_escaping_is_the_librarys() -> None:
    """Label values that need escaping, a timestamp-free info, an unlabelled counter, a histogram
    with its `_created` family, a label set minted after the first page."""
    registry = CollectorRegistry()
    counter = Counter("requests", "Requests\nby \\ route", ["route"], registry=registry)
    gauge = Gauge("vllm:depth", "Queue depth", registry=registry)
    histogram = Histogram("latency_seconds", "Latency", ["code"], registry=registry)
    Info("build", "Build", registry=registry).info({"version": 'say "hi"\n'})
    writer = PageWriter(registry)
    counter.labels(route='a"b\\c').inc()
    gauge.set(float("nan"))
    histogram.labels(code="200").observe(0.3)
    assert writer.page() == generate_latest(registry)
    counter.labels(route="new").inc(2.5)
    gauge.set(float("inf"))
    histogram.labels(code="500").observe(12)
    assert writer.page() == generate_latest(registry)


def test_a_process_page_is_the_librarys() -> None:
    """The `process_*`/`python_*` collectors a vLLM API server also serves (platform and gc only:
    process CPU seconds move between two calls; the collector is held still while both write)."""
    engine = Engine(EngineParams())
    registry = make_registry(EngineCollector(engine, "m"), process_metrics=True)
    for collector in list(registry._collector_to_names):
        if type(collector).__name__ == "ProcessCollector":
            registry.unregister(collector)
    gc.disable()
    try:
        assert PageWriter(registry).page() == generate_latest(registry)
    finally:
        gc.enable()
