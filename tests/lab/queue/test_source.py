"""How the demo's adapter serves `queue_depth` and `dlq_depth` (`lab.queue.source`): the PromQL of
docs/config.example.yaml, loaded by the adapter's own configuration loader, evaluated on the queue
exporter's page, judged by the adapter's provider."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from adapter.app import make_provider
from adapter.catalogue import MetricDef, builtin
from adapter.config import load
from adapter.errors import NoTargets, SourceUnavailable
from adapter.selectors import Selector
from adapter.telemetry import Telemetry
from lab.demo.upstream import QUEUE_METRICS, queue_adapter_config
from lab.emulator import ScaledClock
from lab.queue import ExporterSource, MessageQueue, RoutedSource, serve_exporter
from tests.fakes import FakeSource

DOCS = Path(__file__).resolve().parents[3] / "docs" / "config.example.yaml"


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


def test_the_demo_adapter_configuration_keeps_the_scrape_settings_and_adds_the_queue_metrics() -> None:
    config = queue_adapter_config("team-a", 0.5)
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
        source = ExporterSource(url)
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
        source = ExporterSource(url)
        provider = make_provider(config, source, Telemetry())
        try:
            with pytest.raises(
                NoTargets, match="no series of aws_sqs_approximate_number_of_messages_visible"
            ):
                await provider.get("queue_depth", "default", Selector())
        finally:
            await provider.cache.close()
            await source.close()


async def test_an_exporter_that_does_not_answer_is_source_unavailable() -> None:
    async with serve_exporter([]) as url:
        pass  # the port is closed again
    source = ExporterSource(url, timeout=1.0)
    try:
        with pytest.raises(SourceUnavailable, match="unable to scrape the exporter"):
            await source.fetch(catalogue()["queue_depth"], "default", Selector())
    finally:
        await source.close()


@pytest.mark.parametrize(
    "query",
    [
        "sum by (queue_name) (aws_sqs_approximate_number_of_messages_visible_average{<<.LabelMatchers>>})",
        "sum(rate(aws_sqs_number_of_messages_sent_sum{<<.LabelMatchers>>}[5m]))",
        "sum(a{<<.LabelMatchers>>}) + sum(b{<<.LabelMatchers>>})",
    ],
    ids=["grouping", "a function", "arithmetic"],
)
async def test_a_query_beyond_one_aggregated_selector_is_refused_not_guessed(query: str) -> None:
    metric = load(yaml.safe_dump({"metrics": {"queue_depth": {"query": query, "namespaced": False}}}))
    user = {m.name: m for m in metric.catalogue()}["queue_depth"]
    source = ExporterSource("http://127.0.0.1:9/metrics")
    with pytest.raises(SourceUnavailable, match="beyond the demo's exporter source"):
        await source.fetch(user, "default", Selector())


async def test_the_routed_source_sends_user_metrics_to_the_exporter_and_the_rest_to_the_fleet() -> None:
    main, dlq = queues()
    main.send("a")
    fleet = FakeSource()
    async with serve_exporter([main, dlq]) as url:
        routed = RoutedSource(fleet, ExporterSource(url))
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
