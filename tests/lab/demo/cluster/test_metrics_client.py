"""The HPA-side client of the demo against the real adapter application (with the FakeSource)."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import pytest

from adapter.errors import SourceUnavailable
from adapter.sources import Sample
from lab.demo.cluster.metrics_client import ExternalMetricsClient
from lab.hpa import ExternalMetric, MetricError
from tests.conftest import MakeClient
from tests.fakes import FakeSource


async def client_for(
    make_client: MakeClient, answers: dict[str, Any]
) -> tuple[ExternalMetricsClient, FakeSource, aiohttp.ClientSession]:
    test_client, source = await make_client(source=FakeSource(answers))
    session = test_client.session
    return ExternalMetricsClient(session, str(test_client.make_url("/")), "team-a"), source, session


async def test_reads_the_value_in_milli_units(make_client: MakeClient) -> None:
    """The value is read with MilliValue(): 7.3 requests are 7300 milli-units; the namespace and the metric's
    selector reach the adapter as the HPA sends them (metrics/client.go GetExternalMetric)."""
    client, source, _ = await client_for(make_client, {"vllm_requests_inflight": Sample(7.3, time.time(), 2)})
    metric = ExternalMetric("vllm_requests_inflight", "AverageValue", "24", selector="model_name=llama")
    assert await client.get(metric) == 7300
    name, namespace, selector = source.fetches[-1]
    assert (name, namespace) == ("vllm_requests_inflight", "team-a")
    assert "model_name" in str(selector)


@pytest.mark.parametrize(
    ("answers", "metric", "message"),
    [
        pytest.param(
            {"vllm_requests_inflight": SourceUnavailable("scrape failed")},
            "vllm_requests_inflight",
            "503 ServiceUnavailable",
            id="503 from the adapter",
        ),
        pytest.param({}, "no_such_metric", "404 NotFound", id="unknown metric"),
    ],
)
async def test_errors_become_metric_errors(
    make_client: MakeClient, answers: dict[str, Any], metric: str, message: str
) -> None:
    """An error status is an error for the controller, never a number (the HPA freezes on it)."""
    client, _, _ = await client_for(make_client, answers)
    with pytest.raises(MetricError, match=message):
        await client.get(ExternalMetric(metric, "Value", "1"))


async def test_unreachable_adapter_is_a_metric_error() -> None:
    """A refused connection is a failed fetch, reported per metric by `readings`."""
    async with aiohttp.ClientSession() as session:
        # Port 1 on loopback refuses connections: nothing unprivileged may listen there.
        client = ExternalMetricsClient(session, "http://127.0.0.1:1", "default", timeout=2.0)
        [reading] = await client.readings([ExternalMetric("vllm_requests_inflight", "AverageValue", "24")])
    assert isinstance(reading, MetricError)


async def test_a_rate_on_a_slower_clock_is_read_per_second_of_the_hpas(make_client: MakeClient) -> None:
    """The demo's adapter runs `time_scale` times slower than the emulated cluster, so a rate it serves
    is per second of its clock; the HPA reads it per second of its own (one clock for every output).
    A count is read as served. (The default catalogue has no forecast without a horizon: another
    metric stands in for the rate, the conversion goes by name.)"""
    rate = "vllm_requests_running"
    test_client, _ = await make_client(
        source=FakeSource(
            {
                rate: Sample(5.24, time.time(), 2),
                "vllm_requests_inflight": Sample(7.3, time.time(), 2),
            }
        )
    )
    client = ExternalMetricsClient(
        test_client.session, str(test_client.make_url("/")), "team-a", rates={rate: 10.0}
    )
    assert await client.get(ExternalMetric(rate, "AverageValue", "0.524")) == 524
    assert await client.get(ExternalMetric("vllm_requests_inflight", "AverageValue", "5")) == 7300
