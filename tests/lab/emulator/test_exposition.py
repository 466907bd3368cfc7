"""`PageWriter` writes what `prometheus_client.generate_latest` writes, byte for byte, scrape after
scrape: the library is the reference (it is what vLLM serves its page with), so every test compares
the two on the same registry at the same instant."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from lab.clock import ScaledClock
from lab.emulator.engine import Engine
from lab.emulator.exposition import FamilyLayout, PageWriter, go_float
from lab.emulator.metrics_page import VERSIONS, EngineCollector, make_registry
from lab.emulator.params import EngineParams
from lab.emulator.pd.engine import DecodeEngine
from lab.emulator.pd.fleet import DecodeCollector
from lab.emulator.routes import Served, make_app
from lab.emulator.runner import EngineRunner


@pytest.mark.parametrize("version", VERSIONS)
def test_an_engine_page_is_the_librarys_in_every_state_it_passes(version: str) -> None:
    """Idle, queueing, preempting, draining: the page changes values, never series, and the writer
    and collector (reused, as a replica reuses them) follow each change; the reference is the page
    of a collector made anew at each state."""
    engine = Engine(EngineParams(num_gpu_blocks=64, max_num_seqs=8, max_model_len=1024), seed=3)
    collector = EngineCollector(engine, "m", version=version)
    registry = make_registry(collector, process_metrics=False)
    writer = PageWriter(registry)
    pages = set()
    for t, arrivals in [(0.0, 0), (0.2, 30), (1.0, 10), (3.0, 0), (30.0, 5), (300.0, 0)]:
        for i in range(arrivals):
            engine.submit(200 + 13 * i, 40 + i)
        engine.run_until(t)
        expected = _from_scratch(collector)
        assert writer.page() == expected, f"at t={t}"
        assert generate_latest(registry) == expected, "the samples the library reads"
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


async def test_a_served_page_stays_exact_while_requests_move_its_values(aiohttp_client: Any) -> None:
    """`/metrics` as a replica serves it, scrape after scrape, with requests arriving, running and
    finishing in between: each body is what `generate_latest` writes for the same engine state from
    families made anew (the engine is advanced by hand, so no step runs between the two)."""
    engine = Engine(EngineParams(num_gpu_blocks=128, max_num_seqs=4, max_model_len=2048), seed=5)
    collector = EngineCollector(engine, "llama")
    registry = make_registry(collector, process_metrics=False)
    client = await aiohttp_client(
        # A clock that stands still: the route catches the engine up to its clock before it writes
        # the page, and this test alone moves the engine.
        make_app(Served("llama", EngineRunner(engine, ScaledClock(monotonic=lambda: 0.0)), registry, "0.33"))
    )
    bodies = []
    for t, arrivals in [
        (0.0, 0),
        (0.03, 3),
        (0.3, 0),
        (0.3, 6),
        (0.35, 0),
        (0.45, 0),
        (0.6, 1),
        (60.0, 0),
        (60.0, 0),
    ]:
        for i in range(arrivals):
            engine.submit(100 + 97 * i, 30 + 7 * i)
        engine.run_until(t)
        response = await client.get("/metrics")
        body = await response.read()
        assert body == _from_scratch(collector), f"at t={t}"
        bodies.append(body)
    assert len(set(bodies)) >= 6, "the values must move between scrapes for the comparison to mean anything"
    assert bodies[-1] == bodies[-2], "an unchanged engine serves an unchanged page"


def test_a_decode_engines_page_is_the_librarys() -> None:
    """A P/D decode replica's collector (its own readers and a family of its own) through the same layouts."""
    engine = DecodeEngine(
        EngineParams(max_num_seqs=1, step_jitter=0.0, frontend_seconds=0.0), transfer_seconds=1.0
    )
    collector = DecodeCollector(engine, "m")
    registry = make_registry(collector, process_metrics=False)
    writer = PageWriter(registry)
    first, second = engine.submit(320, 4, ignore_eos=True), engine.submit(160, 4, ignore_eos=True)
    for t in (0.0, 5.0, 6.0 + 1e-9, 10.0):
        if t == 5.0:
            engine.hand_over(first, t)
            engine.hand_over(second, t)
        engine.run_until(t)
        expected = _from_scratch(collector)
        assert writer.page() == expected, f"at t={t}"
        assert generate_latest(registry) == expected, "the samples the library reads"


def _from_scratch(collector: EngineCollector) -> bytes:
    """The library's page for the collector's engine now, independent of the collector's layouts: a new
    collector has none, so it makes every family with the library's own `add_metric` (its layouts are
    built from those samples, and refuse values that are not them)."""
    fresh = type(collector)(
        collector.engine,
        collector.model_name,
        version=collector.version,
        engine_index=int(collector.engine_index),
    )
    fresh.created = collector.created
    return generate_latest(make_registry(fresh, process_metrics=False))


class _Held(Collector):
    """Yields whatever metric the test sets: the library's family, or a layout's."""

    def __init__(self) -> None:
        self.metric: Metric | None = None

    def collect(self) -> Iterator[Metric]:
        assert self.metric is not None
        yield self.metric


def _library(values: list[float]) -> Metric:
    """A counter and a gauge in one family each would do; one labelled counter covers `_total` and
    `_created` lines, whose values move independently here."""
    metric = CounterMetricFamily("moves", "Values that move", labels=["series"])
    for i in range(0, len(values), 2):
        metric.add_metric([str(i)], values[i], created=values[i + 1])
    return metric


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**17), max_value=10**17),
    st.sampled_from([0, 0.0, -0.0, 999_999, 1_000_000, 10**15, -(10**15), 10**16, float("nan")]),
)


@given(st.lists(st.lists(NUMBERS, min_size=6, max_size=6), min_size=1, max_size=6))
def test_a_layout_rewrites_each_moved_value_as_the_library_writes_it(scrapes: list[list[float]]) -> None:
    """Zeros of either sign, NaN, infinities, integers on both sides of Go's switch to exponents:
    a layout built on the first values and handed the later ones writes the page, and makes the
    samples, the library makes from scratch."""
    held, reference = _Held(), _Held()
    mine, theirs = CollectorRegistry(), CollectorRegistry()
    mine.register(held)
    theirs.register(reference)
    writer = PageWriter(mine)
    layout = FamilyLayout(_library(scrapes[0]), scrapes[0])
    for values in scrapes:
        held.metric, reference.metric = layout.written(values), _library(values)
        expected = generate_latest(theirs)
        assert writer.page() == expected
        assert generate_latest(mine) == expected, "the layout's samples, read the library's way"


def test_a_layout_refuses_values_that_are_not_its_samples_in_order() -> None:
    values = [1.0, 100.0, 2.0, 100.0]
    with pytest.raises(ValueError, match="not the samples"):
        FamilyLayout(_library(values), [100.0, 1.0, 100.0, 2.0])
    with pytest.raises(ValueError, match="has 4 samples"):
        FamilyLayout(_library(values), values).written(values[:2])


def test_an_unchanged_family_is_the_same_object_and_its_text_is_kept() -> None:
    layout = FamilyLayout(_library([1, 5.0, 2, 5.0]), [1, 5.0, 2, 5.0])
    same = layout.written([1.0, 5.0, 2, 5.0])
    assert same is layout.metric and layout.written([1, 5.0, 3, 5.0]) is not same


@pytest.mark.parametrize(
    "value",
    [0, -1, 7, 999_999, 1_000_000, 1_234_567, -(10**15), -(10**15) - 1, 10**16, True, 0.5, -0.0, 1e300],
)
def test_go_float_is_the_librarys(value: float) -> None:
    assert go_float(value) == floatToGoString(value)  # type: ignore[no-untyped-call]
