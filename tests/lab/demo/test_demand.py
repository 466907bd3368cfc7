"""No overshoot while capacity loads (`lab.demo.demand`, `lab.demo.cluster.gateway`): in-flight requests
capped at what the arrival rate needs, as PromQL the adapter's loader accepts for a Prometheus source and the
demo's stand-in evaluates on the gateway's and the replicas' pages."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from adapter.config import load
from adapter.sources.page_parser import Parser
from adapter.vocabulary.selectors import Selector
from lab.demo.capacity import ENGINES, measure_capacity
from lab.demo.cluster.gateway import UPSTREAM_REQUESTS, Gateway
from lab.demo.cluster.pages import PageSource, stand_in_config
from lab.demo.demand import METRIC, DemandCap, steady_attainment, steady_need
from lab.demo.loadgen import SCENARIOS
from lab.demo.runner import Demo
from lab.demo.settings import DemoSettings
from lab.emulator import EmulatedFleet
from lab.queue import serve_page
from lab.slo import Slo
from tests.fakes import HandClock


def vllm_page(running: int, waiting: int) -> str:
    return (
        f'vllm:num_requests_running{{model_name="m",engine="0"}} {running}\n'
        f'vllm:num_requests_waiting{{model_name="m",engine="0"}} {waiting}\n'
    )


def test_the_query_is_user_promql_the_adapter_accepts_for_a_prometheus_source() -> None:
    """The loader's checks (it parses, the counter is inside rate(), `<<.LabelMatchers>>` where the
    selector goes) pass; in a cluster (time scale 1) the window and rate are the cap's own."""
    cap = DemandCap(per_replica_rate=1.08, headroom=0.5, window=20.0)
    query = cap.query(8.0, "vllm-llama")
    assert query == (
        "clamp_max(sum(vllm:num_requests_running{<<.LabelMatchers>>}) + "
        "sum(vllm:num_requests_waiting{<<.LabelMatchers>>}), "
        f'scalar(8 * (sum(rate({UPSTREAM_REQUESTS}{{envoy_cluster_name="vllm-llama"}}[20s])) / 1.08 + 0.5)))'
    )
    config = stand_in_config("default", 0.5, {METRIC: cap.metric(8.0, "vllm-llama")})
    metric = {m.name: m for m in config.catalogue()}[METRIC]
    assert (metric.namespaced, metric.on_empty) == (False, None)


def test_in_a_time_scaled_demo_the_window_shrinks_and_the_rate_grows_by_the_scale() -> None:
    query = DemandCap(per_replica_rate=1.08, window=20.0).query(8.0, "c", time_scale=10.0)
    assert "[2s]" in query and "/ 10.8 +" in query


async def test_the_gateway_counts_each_request_as_it_arrives() -> None:
    """Counted before the request is served (a request still running is counted), as Envoy's upstream
    request counter is; the page parses as an exposition with the cluster label."""
    async with EmulatedFleet(time_scale=50.0) as fleet:
        await (await fleet.add_replica()).wait_ready()
        gateway = Gateway(fleet, cluster="demo-model")
        request = await gateway.complete(64, 4, ignore_eos=True)
        assert request.num_output == 4
    page = Parser([UPSTREAM_REQUESTS]).parse(gateway.page())
    assert page[UPSTREAM_REQUESTS] == {(("envoy_cluster_name", "demo-model"),): 1.0}


@pytest.mark.parametrize(
    ("running", "waiting", "expected"),
    [
        pytest.param(30, 2, 32.0, id="below the cap: in-flight as it is"),
        pytest.param(48, 60, 8 * (5.0 / 1.25 + 0.5), id="a backlog: capped at what 5 req/s need"),
    ],
)
async def test_the_value_is_in_flight_capped_at_the_arrivals_need(
    running: int, waiting: int, expected: float
) -> None:
    """Arrivals at 5 req/s for replicas that serve 1.25 each: 4 replicas and half of one of headroom;
    at an in-flight target of 8 the cap is 36, so the HPA asks for at most 5 however long the queue."""
    clock = HandClock()
    arrivals = {"count": 0}
    cap = DemandCap(per_replica_rate=1.25, headroom=0.5, window=20.0)
    config = stand_in_config("default", 0.5, {METRIC: cap.metric(8.0, "c")})
    metric = {m.name: m for m in config.catalogue()}[METRIC]
    page = f'{UPSTREAM_REQUESTS}{{envoy_cluster_name="c"}} {{count}}\n'
    async with (
        serve_page(lambda: page.replace("{count}", str(arrivals["count"]))) as gateway,
        serve_page(lambda: vllm_page(running, waiting)) as replica,
    ):
        source = PageSource(lambda: [gateway, replica], wall=clock)
        try:
            for _ in range(5):  # a scrape every 5 s, 25 arrivals between scrapes
                sample = await source.fetch(metric, "default", Selector())
                clock.now += 5.0
                arrivals["count"] += 25
        finally:
            await source.close()
    assert sample.value == pytest.approx(expected)


def test_the_steady_need_is_the_fewest_replicas_that_meet_the_slo() -> None:
    """Fed round-robin at twice one replica's capacity, one replica falls behind without end, and two
    run saturated; the need is more, and one more replica than the need changes little."""
    params = ENGINES["demo"]
    capacity = measure_capacity(params)
    need = steady_need(params, 2.0 * capacity, Slo())
    assert need > 2
    assert steady_attainment(params, need, 2.0 * capacity, Slo()) >= 0.99
    assert steady_attainment(params, need - 1, 2.0 * capacity, Slo()) < 0.99


def test_the_demo_on_the_demand_metric_caps_at_its_measured_capacity(tmp_path: Path) -> None:
    """`--metric inflight_within_demand`: an in-flight target of half the batch, and the cap's per-replica
    rate three quarters of the replica's measured capacity."""
    settings = DemoSettings(profile=SCENARIOS["default"], out=tmp_path, metric=METRIC, capacity=1.44)
    demo = Demo(settings, io.StringIO())
    assert demo.target == 8.0
    assert demo.demand is not None and demo.demand.per_replica_rate == pytest.approx(1.08)
    assert [m.name for m in demo.controller.spec.metrics] == [METRIC]
    assert (
        Demo(DemoSettings(profile=SCENARIOS["default"], out=tmp_path, capacity=1.44), io.StringIO()).demand
        is None
    )


def test_the_cluster_configuration_in_the_benchmarks_is_the_caps_own_and_loads() -> None:
    """docs/benchmarks/demo.md shows the metric as a cluster would configure it: the demo's query at time
    scale 1 for a 1.08 req/s replica and an in-flight target of 8, accepted by the adapter's loader."""
    page = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "demo.md"
    text = page.read_text(encoding="utf-8")
    section = text[text.index("## Overshoot while capacity loads") :]
    block = section[
        section.index("```yaml") + len("```yaml") : section.index("```", section.index("```yaml") + 7)
    ]
    documented = yaml.safe_load(block)["metrics"][METRIC]
    assert documented["query"] == DemandCap(per_replica_rate=1.08).query(8.0, "vllm-llama")
    config = load(yaml.safe_dump({"metrics": {METRIC: documented}}))
    assert METRIC in {m.name for m in config.catalogue()}
