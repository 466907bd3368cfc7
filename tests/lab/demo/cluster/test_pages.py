"""The demo's stand-in for Prometheus (`lab.demo.cluster.pages`): user metrics evaluated on the pages of its
targets, as the docs configure them, judged by the adapter's own provider.

`queue_depth` and `dlq_depth` are read exactly as docs/config.example.yaml defines them (the PromQL
itself is tested construct by construct in test_promql_eval.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from adapter.app import make_provider
from adapter.config import load
from adapter.errors import NoTargets, SourceUnavailable
from adapter.telemetry import Telemetry
from adapter.vocabulary.catalogue import MetricDef, builtin
from adapter.vocabulary.selectors import Selector
from lab.clock import ScaledClock
from lab.demo.cluster.pages import PageSource, RoutedSource, stand_in_config
from lab.demo.cluster.promql_eval import Unsupported
from lab.demo.cluster.upstream import QUEUE_METRICS, queue_adapter_config
from lab.queue import MessageQueue, serve_exporter, serve_page
from tests.fakes import FakeSource

DOCS = Path(__file__).resolve().parents[4] / "docs" / "config.example.yaml"


def docs_metrics() -> dict[str, dict[str, object]]:
    metrics = yaml.safe_load(DOCS.read_text(encoding="utf-8"))["metrics"]
    return {name: metrics[name] for name in ("queue_depth", "dlq_depth")}


def catalogue() -> dict[str, MetricDef]:
    return {m.name: m for m in queue_adapter_config("default", 0.5).catalogue()}


def queues() -> tuple[MessageQueue[str], MessageQueue[str]]:
    clock = ScaledClock()
    dlq: MessageQueue[str] = MessageQueue("inference-requests-dlq", clock)
    return MessageQueue("inference-requests", clock, dead_letter=dlq), dlq


def test_the_demo_serves_the_queue_metrics_exactly_as_the_docs_configure_them() -> None:
    assert docs_metrics() == QUEUE_METRICS


def test_the_stand_in_configuration_keeps_the_scrape_settings_and_adds_the_user_metrics() -> None:
    config = stand_in_config("team-a", 0.5, QUEUE_METRICS)
    assert (config.scrape.interval, config.scrape.namespace) == (0.5, "team-a")
    assert config.refresh_interval == 0.5
    assert (config.server.address, config.server.insecure_serving) == ("127.0.0.1", True)
    assert {"queue_depth", "dlq_depth", "vllm_requests_inflight"} <= set(catalogue())


async def test_queue_depth_and_dlq_depth_read_the_visible_messages_of_the_queue_and_its_dlq() -> None:
    main, dlq = queues()
    for body in "abcd":
        main.send(body)
    main.receive(1)
    dlq.send("dead")
    dlq.send("dead too")
    metrics = catalogue()
    async with serve_exporter([main, dlq]) as url:
        source = PageSource(lambda: [url])
        try:
            depth = await source.fetch(metrics["queue_depth"], "default", Selector())
            dead = await source.fetch(metrics["dlq_depth"], "default", Selector())
        finally:
            await source.close()
    assert (depth.value, depth.targets) == (3.0, 1)
    assert abs(depth.timestamp - time.time()) < 5
    assert (dead.value, dead.targets) == (2.0, None)


async def test_through_the_provider_a_missing_queue_is_a_503_never_a_zero() -> None:
    """`presence` and `on_empty: error` keep their meaning: an exporter that shows no series of the
    queue (renamed, or the exporter lost its AWS credentials) is NoTargets, which the HPA holds on."""
    other: MessageQueue[str] = MessageQueue("another-queue", ScaledClock())
    config = queue_adapter_config("default", 0.5)
    async with serve_exporter([other]) as url:
        source = PageSource(lambda: [url])
        provider = make_provider(config, source, Telemetry())
        try:
            with pytest.raises(NoTargets, match="no series match the presence selector"):
                await provider.get("queue_depth", "default", Selector())
        finally:
            await provider.cache.close()
            await source.close()


async def test_a_target_that_does_not_answer_is_source_unavailable() -> None:
    async with serve_exporter([]) as url:
        pass  # the port is closed again
    source = PageSource(lambda: [url], timeout=1.0)
    try:
        with pytest.raises(SourceUnavailable, match="unable to scrape"):
            await source.fetch(catalogue()["queue_depth"], "default", Selector())
    finally:
        await source.close()


async def test_the_routed_source_sends_user_metrics_to_the_pages_and_the_rest_to_the_fleet() -> None:
    main, dlq = queues()
    main.send("a")
    fleet = FakeSource()
    async with serve_exporter([main, dlq]) as url:
        routed = RoutedSource(fleet, PageSource(lambda: [url]))
        try:
            await routed.start()
            queued = await routed.fetch(catalogue()["queue_depth"], "default", Selector())
            await routed.fetch(builtin("vllm_requests_inflight"), "default", Selector())
            await routed.ping()
        finally:
            await routed.close()
    assert queued.value == 1.0
    assert [name for name, _, _ in fleet.fetches] == ["vllm_requests_inflight"]
    assert fleet.started and fleet.closed


async def test_a_query_returning_several_series_is_refused() -> None:
    config = load(
        yaml.safe_dump({"metrics": {"depths": {"query": "q{<<.LabelMatchers>>}", "namespaced": False}}})
    )
    metric = {m.name: m for m in config.catalogue()}["depths"]
    page = 'q{queue_name="x"} 3\nq{queue_name="y-dlq"} 1\n'
    async with serve_page(lambda: page) as url:
        source = PageSource(lambda: [url])
        try:
            with pytest.raises(Unsupported, match="returned 2 series"):
                await source.fetch(metric, "default", Selector())
        finally:
            await source.close()
