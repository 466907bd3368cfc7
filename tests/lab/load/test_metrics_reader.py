"""Reading a model's part of vLLM's /metrics: a real 0.26 capture, the pre-rename names, other pages."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from lab.emulator.engine import Engine
from lab.emulator.metrics_page import EngineCollector, make_registry
from lab.emulator.params import EngineParams
from lab.load.metrics_reader import Histogram, NotVllm, PageReader, is_vllm

DATA = Path(__file__).parents[2] / "data"
MODEL = "llama-1b-dummy"


def test_a_real_overloaded_page() -> None:
    """The capture at the worst moment of a real run: 24 running, 575 waiting, KV 0.96, and the
    counters and histograms as they stood."""
    snapshot = PageReader(MODEL).read((DATA / "metrics-overloaded.prom").read_text(), at=12.0, inflight=7)
    assert (snapshot.at, snapshot.inflight) == (12.0, 7)
    assert (snapshot.running, snapshot.waiting, snapshot.preemptions) == (24.0, 575.0, 657.0)
    assert snapshot.kv_usage == pytest.approx(0.9599, abs=1e-4)
    assert snapshot.generation_tokens == 1.185906e06
    assert snapshot.ttft.count == 4162.0 and snapshot.ttft.sum == pytest.approx(9346.75, abs=0.01)
    assert snapshot.ttft.cumulative[-1] == 4162.0 and snapshot.ttft.bounds[-1] == math.inf
    assert snapshot.tpot.count == 4137.0, "TPOT is the per-request request_time_per_output_token family"


def test_the_cache_config_gives_blocks_and_block_size() -> None:
    page = (DATA / "metrics-overloaded.prom").read_text()
    config = PageReader(MODEL).cache_config(page)
    assert (config.num_gpu_blocks, config.block_size) == (2048, 16)
    assert PageReader(MODEL).models(page) == {MODEL}


def test_another_models_series_are_not_read() -> None:
    snapshot = PageReader("other").read((DATA / "metrics-overloaded.prom").read_text(), at=0.0)
    assert (snapshot.running, snapshot.waiting, snapshot.ttft.count) == (0.0, 0.0, 0.0)


def test_pre_rename_names_are_read_too() -> None:
    """A vLLM 0.10 page (gpu_cache_usage_perc, time_per_output_token_seconds) reads the same."""
    engine = Engine(EngineParams(), start=0.0)
    engine.submit(100, 400, ignore_eos=True, at=0.0)
    engine.run_until(0.02)  # past the front-end, into the first step
    page = generate_latest(
        make_registry(EngineCollector(engine, "m", version="0.10"), process_metrics=False)
    ).decode()
    assert "vllm:gpu_cache_usage_perc" in page and "vllm:kv_cache_usage_perc" not in page
    snapshot = PageReader("m").read(page, at=0.0)
    assert snapshot.running == 1.0 and snapshot.kv_usage > 0


def test_a_page_without_vllm_series_is_refused() -> None:
    page = "# TYPE up gauge\nup 1\nprocess_cpu_seconds_total 3\n"
    assert not is_vllm(page)
    with pytest.raises(NotVllm, match="no vllm: series"):
        PageReader("m").read(page, at=0.0)


def test_histogram_quantile_as_prometheus_computes_it() -> None:
    """Linear within the bucket; the highest finite bound when the rank falls in +Inf; none without data."""
    histogram = Histogram((0.1, 0.5, math.inf), (10.0, 30.0, 40.0), 9.0, 40.0)
    assert histogram.quantile(0.5) == pytest.approx(0.1 + 0.4 * 0.5)
    assert histogram.quantile(0.99) == 0.5
    assert histogram.mean == pytest.approx(0.225)
    assert Histogram().quantile(0.9) is None and Histogram().mean is None
    later = Histogram((0.1, 0.5, math.inf), (12.0, 35.0, 45.0), 10.0, 45.0)
    assert later.minus(histogram) == Histogram((0.1, 0.5, math.inf), (2.0, 5.0, 5.0), 1.0, 5.0)
