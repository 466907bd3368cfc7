"""A smoothed metric through the external scaler: KEDA reads the same provider and value cache as the
HTTP API, so the source is asked for the smoothed definition once and both front ends serve its value."""

from __future__ import annotations

import time

from adapter.keda import externalscaler_pb2 as pb
from adapter.sources import Sample
from adapter.vocabulary.catalogue import GaugeSpec, MetricDef
from adapter.vocabulary.selectors import Selector
from tests.fakes import FakeSource
from tests.keda.conftest import MakeKeda, ref

INFLIGHT = {"metric": "vllm_requests_inflight", "labelSelector": "model_name=llama", "target": "12"}


def _smoothing_as_value(metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
    """A source answering the smoothing window the provider asked it for, as the value."""
    assert isinstance(metric.spec, GaugeSpec)
    return Sample(metric.spec.smoothing_seconds, time.time(), 2)


async def test_keda_and_the_http_api_serve_the_smoothed_definition_from_one_cached_key(
    make_keda: MakeKeda,
) -> None:
    source = FakeSource({"vllm_requests_inflight": _smoothing_as_value})
    keda = await make_keda("metrics: {vllm_requests_inflight: {smoothing: 30s}}", source)
    answer = await keda.stub.GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=ref(**INFLIGHT), metricName="vllm_requests_inflight")
    )
    (item,) = answer.metricValues
    assert item.metricValueFloat == 30.0, "the scaler's fetch carried smoothing: 30s to the source"
    assert await keda.http_value("vllm_requests_inflight", "prod", "model_name=llama") == 30.0
    assert len(source.fetches) == 1, "both front ends read one cached key"


async def test_without_smoothing_the_scaler_asks_for_the_latest_value(make_keda: MakeKeda) -> None:
    keda = await make_keda("", FakeSource({"vllm_requests_inflight": _smoothing_as_value}))
    answer = await keda.stub.GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=ref(**INFLIGHT), metricName="vllm_requests_inflight")
    )
    assert answer.metricValues[0].metricValueFloat == 0.0
