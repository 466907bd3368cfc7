"""The demo's PromQL stand-in (`lab.demo.pages`): user metrics evaluated on the pages of the demo's targets,
as the docs configure them, judged by the adapter's own provider.

`queue_depth` and `dlq_depth` are read exactly as docs/config.example.yaml defines them; the evaluator's
part of PromQL is checked construct by construct against hand-written pages, with an injected clock
so that `rate()` windows are exact.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
import yaml

from adapter.app import make_provider
from adapter.catalogue import MetricDef, builtin
from adapter.config import load
from adapter.errors import NoTargets, SourceUnavailable
from adapter.promql_parse import parse_template
from adapter.selectors import Selector
from adapter.sources.page_parser import Parser
from adapter.telemetry import Telemetry
from lab.demo.pages import Evaluator, PageSource, RoutedSource, Scrapes, Unsupported, Value, stand_in_config
from lab.demo.upstream import QUEUE_METRICS, queue_adapter_config
from lab.emulator import ScaledClock
from lab.queue import MessageQueue, serve_exporter, serve_page
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


# --- the evaluator, on hand-written pages -----------------------------------------------------------

PAGE_A = 'gw_total{cluster="c"} 100\nq{queue_name="x"} 3\nq{queue_name="y-dlq"} 1\n'
PAGE_B = 'gw_total{cluster="c"} 40\nq{queue_name="x"} 4\n'


def scrapes(*pages_at: tuple[float, str, str]) -> Scrapes:
    """(wall time, target, page text) → what PageSource would have recorded."""
    recorded = Scrapes()
    parser = Parser(["gw_total", "q"])
    for at, target, text in pages_at:
        recorded.add(target, at, parser.parse(text))
    return recorded


def evaluate(query: str, recorded: Scrapes, now: float, targets: tuple[str, ...] = ("a", "b")) -> Value:
    return Evaluator(recorded, list(targets), now).value(parse_template(query))


def only(value: Value) -> float:
    """The value of a one-series vector."""
    assert isinstance(value, list) and len(value) == 1
    return value[0][1]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("sum(q)", 8.0, id="sum over targets"),
        pytest.param('max(q{queue_name=~".*-dlq"})', 1.0, id="regex matcher, anchored"),
        pytest.param('count(q{queue_name!="x"})', 1.0, id="not-equal matcher"),
        pytest.param('sum(q{instance="b"})', 4.0, id="each target's series carry its instance"),
        pytest.param("sum(q) / 2 + 1", 5.0, id="arithmetic with numbers"),
        pytest.param("-sum(q)", -8.0, id="unary minus"),
        pytest.param("sum(q) - sum(q{queue_name='x'})", 1.0, id="one series a side"),
        pytest.param("clamp_max(sum(q), 5)", 5.0, id="clamp_max"),
        pytest.param("clamp_min(sum(q), 9)", 9.0, id="clamp_min"),
        pytest.param("clamp_max(sum(q), scalar(sum(q{queue_name='x'})))", 7.0, id="scalar of one series"),
    ],
)
def test_instant_queries(query: str, expected: float) -> None:
    recorded = scrapes((10.0, "a", PAGE_A), (10.0, "b", PAGE_B))
    value = evaluate(query, recorded, 10.0)
    assert value == expected or value == [((), expected)]


def test_rate_and_increase_follow_prometheus_over_the_window() -> None:
    """Counter samples 10 s apart: rate() is the increase over the window per second, extrapolated to the
    window's edges as Prometheus does; a counter reset is a restart, not a fall; one scrape is no rate."""
    recorded = scrapes(
        (0.0, "a", 'gw_total{cluster="c"} 100\n'),
        (10.0, "a", 'gw_total{cluster="c"} 150\n'),
        (20.0, "a", 'gw_total{cluster="c"} 200\n'),
        (20.0, "b", 'gw_total{cluster="c"} 5\n'),
    )
    rate = only(evaluate("sum(rate(gw_total[20s]))", recorded, 20.0, ("a",)))
    assert rate == pytest.approx(5.0)
    increase = only(evaluate("sum(increase(gw_total[20s]))", recorded, 20.0, ("a",)))
    assert increase == pytest.approx(100.0)
    assert evaluate("sum(rate(gw_total[20s]))", recorded, 20.0, ("b",)) == []
    restarted = scrapes(
        (0.0, "a", "gw_total 90\n"), (10.0, "a", "gw_total 10\n"), (20.0, "a", "gw_total 60\n")
    )
    after_reset = only(evaluate("sum(rate(gw_total[20s]))", restarted, 20.0, ("a",)))
    assert after_reset == pytest.approx(3.0)  # 10 after the restart, then 50, over 20 s


def test_an_empty_vector_stays_empty_and_scalar_of_it_is_nan() -> None:
    recorded = scrapes((10.0, "a", PAGE_A))
    assert evaluate("sum(nothing)", recorded, 10.0) == []
    value = only(evaluate("clamp_max(sum(q), scalar(sum(nothing)))", recorded, 10.0))
    assert math.isnan(value)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        pytest.param("sum by (queue_name) (q)", "ungrouped", id="grouping"),
        pytest.param("q > 1", "operator", id="a comparison"),
        pytest.param("q + q", "one series a side", id="vectors of several series"),
        pytest.param("sum(q) + on(x) sum(q)", "on/ignoring", id="vector matching"),
        pytest.param("histogram_quantile(0.9, q)", "histogram_quantile", id="another function"),
        pytest.param("sum(q offset 1m)", "offset", id="offset"),
        pytest.param("rate(q{x='1'}[1m:10s])", "range selector", id="a subquery"),
    ],
)
def test_what_it_does_not_evaluate_is_refused_never_guessed(query: str, message: str) -> None:
    with pytest.raises(Unsupported, match=message):
        evaluate(query, scrapes((10.0, "a", PAGE_A)), 10.0)


async def test_a_query_returning_several_series_is_refused() -> None:
    config = load(
        yaml.safe_dump({"metrics": {"depths": {"query": "q{<<.LabelMatchers>>}", "namespaced": False}}})
    )
    metric = {m.name: m for m in config.catalogue()}["depths"]
    async with serve_page(lambda: PAGE_A) as url:
        source = PageSource(lambda: [url])
        try:
            with pytest.raises(Unsupported, match="returned 2 series"):
                await source.fetch(metric, "default", Selector())
        finally:
            await source.close()
