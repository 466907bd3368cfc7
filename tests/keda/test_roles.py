"""Role-bound metrics through the KEDA external scaler: the same role, the same refusals as the HTTP API."""

from __future__ import annotations

import time

import grpc
import pytest

from adapter.errors import NoTargets
from adapter.keda import externalscaler_pb2 as pb
from adapter.sources import Sample
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.selectors import Selector
from tests.fakes import FakeSource
from tests.keda.conftest import MakeKeda, ref
from tests.keda.harness import reason

BACKLOG = "vllm_prefill_backlog_seconds"
CONFIG = f"metrics: {{{BACKLOG}: {{prefill_throughput: 1000}}}}"


def _role_as_value(metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
    """1.0 when the selector reaching the source names the prefill pool, else 0.0."""
    return Sample(float(selector.equalities().get("llm-d.ai/role") == "prefill"), time.time(), 2)


async def get(keda: object, selector: str) -> float:
    trigger = ref(metric=BACKLOG, labelSelector=selector, target="1")
    answer = await keda.stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=trigger, metricName=BACKLOG))  # type: ignore[attr-defined]
    return float(answer.metricValues[0].metricValueFloat)


async def test_the_scaler_reads_the_prefill_pool_and_refuses_the_other(make_keda: MakeKeda) -> None:
    source = FakeSource({BACKLOG: _role_as_value})
    keda = await make_keda(CONFIG, source)
    assert await get(keda, "model_name=llama") == 1.0, "the role reached the source"
    assert await keda.http_value(BACKLOG, "prod", "model_name=llama") == 1.0
    assert len(source.fetches) == 1, "with and without the role in the selector, one key"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await get(keda, "model_name=llama,llm-d.ai/role=decode")
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert reason(caught.value) == "role_conflict"
    assert "reads the prefill pool (llm-d.ai/role=prefill)" in (caught.value.details() or "")


async def test_no_pod_of_the_role_is_unavailable_naming_the_label(make_keda: MakeKeda) -> None:
    keda = await make_keda(CONFIG, FakeSource({BACKLOG: NoTargets("no series match")}))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await get(keda, "model_name=llama")
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    assert reason(caught.value) == "no_role_targets"
    assert "no pod labelled llm-d.ai/role=prefill matches" in (caught.value.details() or "")
