"""The external scaler's RPCs over a real gRPC connection: values as the HTTP API's, errors as codes.

The application is the real one (`create_app`), with a FakeSource below the provider, so these tests
cover every row of the failure table above the source, through both front ends at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable

import grpc
import pytest

from adapter.errors import (
    AdapterError,
    EmptyResult,
    NoTargets,
    PartialFailure,
    SourceUnavailable,
    Unresolved,
)
from adapter.keda import externalscaler_pb2 as pb
from adapter.sources import Sample
from tests.fakes import FakeSource
from tests.keda.conftest import MakeKeda, ref
from tests.keda.harness import reason

QUEUE_CONFIG = "metrics: {queue_depth: {query: 'sum(q)', namespaced: false}}"
INFLIGHT = {"metric": "vllm_requests_inflight", "labelSelector": "model_name=llama", "target": "12"}
#: one RPC on the (untyped, generated) stub, to await and expect an AioRpcError from
RPC = Callable[[], Awaitable[object]]


async def test_get_metric_spec_names_the_metric_and_the_target(make_keda: MakeKeda) -> None:
    """One MetricSpec: the catalogue name, `targetSizeFloat` = target exactly, `targetSize` rounded up."""
    keda = await make_keda()
    answer = await keda.stub.GetMetricSpec(ref(**{**INFLIGHT, "target": "7.25"}))
    assert len(answer.metricSpecs) == 1
    spec = answer.metricSpecs[0]
    assert (spec.metricName, spec.targetSizeFloat, spec.targetSize) == ("vllm_requests_inflight", 7.25, 8)
    assert keda.fake.fetches == [], "a spec costs no upstream query"
    assert keda.calls("GetMetricSpec", "OK") == 1


@pytest.mark.parametrize(
    ("value", "served", "integer"),
    [
        pytest.param(40.0, 40.0, 40, id="integer value"),
        pytest.param(0.7304, 0.73, 1, id="fraction served to the milli-unit as the quantity 730m"),
        pytest.param(2.5, 2.5, 2, id="integer rounds half to even"),
        pytest.param(0.0, 0.0, 0, id="zero"),
    ],
)
async def test_get_metrics_serves_what_the_http_api_serves(
    make_keda: MakeKeda, value: float, served: float, integer: int
) -> None:
    """`metricValueFloat` is the HTTP API's value for the same key, bit for bit; `metricValue` its integer."""
    keda = await make_keda(source=FakeSource({"vllm_requests_inflight": Sample(value, time.time(), 2)}))
    answer = await keda.stub.GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=ref(**INFLIGHT), metricName="vllm_requests_inflight")
    )
    assert len(answer.metricValues) == 1
    item = answer.metricValues[0]
    assert item.metricName == "vllm_requests_inflight"
    assert (
        item.metricValueFloat
        == served
        == await keda.http_value("vllm_requests_inflight", "prod", "model_name=llama")
    )
    assert item.metricValue == integer
    assert len(keda.fake.fetches) == 1, "both front ends read one cached key"
    assert keda.fake.fetches[0][1] == "prod", "the ScaledObject's namespace scopes the query"
    assert str(keda.fake.fetches[0][2]) == "model_name=llama"


async def test_keys_resolved_from_the_environment_scale_as_keda_sends_them(make_keda: MakeKeda) -> None:
    """A trigger written with `metricFromEnv`, `labelSelectorFromEnv`, `targetFromEnv` and
    `activationTargetFromEnv` reaches the scaler with the resolved values under those same keys
    (kedacore/keda v2.16-v2.20 `parseExternalScalerMetadata`); every RPC answers as for the plain keys."""
    keda = await make_keda(source=FakeSource({"vllm_requests_inflight": Sample(30.0, time.time(), 2)}))
    from_env = ref(
        metricFromEnv="vllm_requests_inflight",
        labelSelectorFromEnv="model_name=llama",
        targetFromEnv="12",
        activationTargetFromEnv="29",
    )
    spec = (await keda.stub.GetMetricSpec(from_env)).metricSpecs[0]
    assert (spec.metricName, spec.targetSizeFloat) == ("vllm_requests_inflight", 12.0)
    values = await keda.stub.GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=from_env, metricName="vllm_requests_inflight")
    )
    assert values.metricValues[0].metricValueFloat == 30.0
    assert (await keda.stub.IsActive(from_env)).result is True, "30 is above the activation target 29"
    assert str(keda.fake.fetches[0][2]) == "model_name=llama", "the selector from the environment scopes it"
    assert await keda.http_value("vllm_requests_inflight", "prod", "model_name=llama") == 30.0
    assert len(keda.fake.fetches) == 1, "the same key as the HTTP API's: one cached fetch"


async def test_namespace_isolation_follows_the_scaled_object(make_keda: MakeKeda) -> None:
    """The same trigger in two namespaces asks two scoped questions and gets each namespace's value."""
    values = {"team-a": 3.0, "team-b": 9.0}
    keda = await make_keda(
        source=FakeSource(
            {"vllm_requests_waiting": lambda _m, ns, _s: Sample(values[ns or ""], time.time(), 1)}
        )
    )
    for namespace, expected in values.items():
        request = pb.GetMetricsRequest(
            scaledObjectRef=ref(namespace, metric="vllm_requests_waiting", target="1")
        )
        answer = await keda.stub.GetMetrics(request)
        assert answer.metricValues[0].metricValueFloat == expected
    assert sorted(fetch[1] or "" for fetch in keda.fake.fetches) == ["team-a", "team-b"]


async def test_cluster_wide_metric_ignores_the_namespace_as_http_does(make_keda: MakeKeda) -> None:
    """A metric with `namespaced: false` is fetched without a namespace scope, as over HTTP."""
    keda = await make_keda(QUEUE_CONFIG, FakeSource({"queue_depth": Sample(340.0, time.time())}))
    answer = await keda.stub.GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=ref(metric="queue_depth", target="50"))
    )
    assert answer.metricValues[0].metricValueFloat == 340.0 == await keda.http_value("queue_depth", "other")
    assert keda.fake.fetches[0][1] is None


@pytest.mark.parametrize(
    ("value", "activation", "active"),
    [
        pytest.param(0.0, None, False, id="zero is inactive with the default activation 0"),
        pytest.param(0.001, None, True, id="any value above 0 is active by default"),
        pytest.param(5.0, "5", False, id="equal to activationTarget is not above it"),
        pytest.param(5.001, "5", True, id="above activationTarget is active"),
        pytest.param(0.0004, None, False, id="below the milli-unit the served value is 0: inactive"),
    ],
)
async def test_is_active_means_above_activation_target(
    make_keda: MakeKeda, value: float, activation: str | None, active: bool
) -> None:
    """IsActive is true iff the served value is strictly above `activationTarget`."""
    keda = await make_keda(QUEUE_CONFIG, FakeSource({"queue_depth": Sample(value, time.time())}))
    metadata = {"metric": "queue_depth", "target": "1"} | (
        {"activationTarget": activation} if activation else {}
    )
    answer = await keda.stub.IsActive(ref(**metadata))
    assert answer.result is active
    assert keda.calls("IsActive", "OK") == 1


FAILURES = [
    pytest.param(
        SourceUnavailable("connect to 10.0.0.1:9090 refused"), "source_unavailable", id="source unreachable"
    ),
    pytest.param(Sample(5.0, time.time() - 3600), "stale", id="stale sample"),
    pytest.param(Sample(5.0, time.time() + 3600), "bad_timestamp", id="sample from the future"),
    pytest.param(NoTargets("no series"), "no_targets", id="no targets"),
    pytest.param(PartialFailure("2 of 5 pods failed"), "partial", id="partial scrape under on_partial error"),
    pytest.param(Unresolved("p90 in first bucket"), "unresolved", id="unresolved quantile"),
    pytest.param(lambda *_: Sample(None, time.time(), 2), "gauge_gap", id="absent gauge on present targets"),
    pytest.param(lambda *_: Sample(math.nan, time.time(), 2), "gauge_gap", id="NaN gauge"),
]


@pytest.mark.parametrize(("answer", "label"), FAILURES)
async def test_every_failure_row_is_unavailable_never_a_value(
    make_keda: MakeKeda, answer: object, label: str
) -> None:
    """Each failure row is UNAVAILABLE on GetMetrics, IsActive and StreamIsActive (HTTP: 503), with the
    HTTP API's generic message and the reason in the trailing metadata; counted by method and code."""
    keda = await make_keda(source=FakeSource({"vllm_requests_waiting": answer}))  # type: ignore[dict-item]
    metadata = ref(metric="vllm_requests_waiting", target="4")
    http = await keda.http.get("/apis/external.metrics.k8s.io/v1beta1/namespaces/prod/vllm_requests_waiting")
    assert http.status == 503
    http_message = (await http.json())["message"]
    calls: dict[str, RPC] = {
        "GetMetrics": lambda: keda.stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=metadata)),
        "IsActive": lambda: keda.stub.IsActive(metadata),
        "StreamIsActive": lambda: keda.stub.StreamIsActive(metadata).read(),
    }
    for method, call in calls.items():
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call()
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, method
        assert caught.value.details() == http_message
        assert reason(caught.value) == label
        for secret in ("10.0.0.1", "9090", "pods failed", "first bucket", "series"):
            assert secret not in (caught.value.details() or "")
        assert keda.calls(method, "UNAVAILABLE") == 1
    errors = keda.telemetry.registry.get_sample_value(
        "vllm_autoscale_errors_total", {"metric": "vllm_requests_waiting", "reason": label}
    )
    assert errors == 4, "one HTTP and three gRPC errors, in the counter the alerts read"


async def test_on_empty_is_a_value_not_an_error(make_keda: MakeKeda) -> None:
    """An event statistic with no events is the metric's on_empty value (0), on both front ends."""
    keda = await make_keda(source=FakeSource({"vllm_tpot_seconds": Sample(None, time.time(), 2)}))
    answer = await keda.stub.GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=ref(metric="vllm_tpot_seconds", target="0.05"))
    )
    assert answer.metricValues[0].metricValueFloat == 0.0 == await keda.http_value("vllm_tpot_seconds")
    assert (await keda.stub.IsActive(ref(metric="vllm_tpot_seconds", target="0.05"))).result is False


async def test_on_empty_error_is_unavailable(make_keda: MakeKeda) -> None:
    """With `on_empty: error` the same situation is UNAVAILABLE."""
    keda = await make_keda(
        "metrics: {vllm_tpot_seconds: {on_empty: error}}",
        FakeSource({"vllm_tpot_seconds": EmptyResult("none")}),
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await keda.stub.IsActive(ref(metric="vllm_tpot_seconds", target="1"))
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert reason(caught.value) == "empty"


async def test_unknown_metric_is_not_found_and_costs_nothing(make_keda: MakeKeda) -> None:
    """A name outside the catalogue is NOT_FOUND (HTTP: 404) on every RPC, and the source is never asked."""
    keda = await make_keda()
    unknown = ref(metric="cpu_usage", target="1")
    calls: tuple[RPC, ...] = (
        lambda: keda.stub.GetMetricSpec(unknown),
        lambda: keda.stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=unknown)),
        lambda: keda.stub.IsActive(unknown),
        lambda: keda.stub.StreamIsActive(unknown).read(),
    )
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call()
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert "'cpu_usage' is not served" in (caught.value.details() or "")
    assert keda.fake.fetches == []
    assert (
        keda.telemetry.registry.get_sample_value(
            "vllm_autoscale_errors_total", {"metric": "<unknown>", "reason": "not_found"}
        )
        == 4
    )


async def test_too_many_keys_is_resource_exhausted(make_keda: MakeKeda) -> None:
    """Past `cache.max_keys` a new selector is RESOURCE_EXHAUSTED (HTTP: 429); known keys still answer."""
    keda = await make_keda("cache: {max_keys: 2}")
    for model in ("a", "b"):
        await keda.stub.IsActive(
            ref(metric="vllm_requests_waiting", target="1", labelSelector=f"model_name={model}")
        )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await keda.stub.IsActive(
            ref(metric="vllm_requests_waiting", target="1", labelSelector="model_name=c")
        )
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert reason(caught.value) == "too_many_keys"
    again = await keda.stub.IsActive(
        ref(metric="vllm_requests_waiting", target="1", labelSelector="model_name=a")
    )
    assert again.result is True


@pytest.mark.parametrize(
    ("metadata", "namespace", "named"),
    [
        pytest.param(
            {"target": "1"}, "prod", "'metric' (or 'metricFromEnv') is required", id="metric missing"
        ),
        pytest.param(
            {"metric": "queue_depth"},
            "prod",
            "'target' (or 'targetFromEnv') is required",
            id="target missing (also: a targetFromEnv whose variable KEDA found unset)",
        ),
        pytest.param(
            {"metric": "queue_depth", "target": "0.0004"},
            "prod",
            "'target' value '0.0004'",
            id="target below 1m, which the HPA would get as 0",
        ),
        pytest.param(
            {"metric": "queue_depth", "target": "1", "targetFromEnv": "1"},
            "prod",
            "'target' and 'targetFromEnv' are both set",
            id="a key given both ways",
        ),
        pytest.param(
            {"metric": "queue_depth", "target": "0"}, "prod", "'target' value '0'", id="target zero"
        ),
        pytest.param(
            {"metric": "queue_depth", "target": "1", "labelSelector": "a>1"},
            "prod",
            "'labelSelector'",
            id="unsupported selector operator",
        ),
        pytest.param(
            {"metric": "queue_depth", "target": "1", "activationThreshold": "3"},
            "prod",
            "'activationThreshold'",
            id="a key of another scaler",
        ),
        pytest.param(
            {"metric": "queue_depth", "target": "1"},
            "Prod",
            "invalid namespace 'Prod'",
            id="namespace not a DNS label",
        ),
    ],
)
async def test_bad_metadata_is_invalid_argument_naming_it(
    make_keda: MakeKeda, metadata: dict[str, str], namespace: str, named: str
) -> None:
    """A bad key, value or namespace is INVALID_ARGUMENT naming it, on every RPC, before any upstream cost."""
    keda = await make_keda()
    bad = ref(namespace, **metadata)
    calls: dict[str, RPC] = {
        "GetMetricSpec": lambda: keda.stub.GetMetricSpec(bad),
        "GetMetrics": lambda: keda.stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=bad)),
        "IsActive": lambda: keda.stub.IsActive(bad),
        "StreamIsActive": lambda: keda.stub.StreamIsActive(bad).read(),
    }
    for method, call in calls.items():
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call()
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, method
        assert named in (caught.value.details() or ""), method
        assert keda.calls(method, "INVALID_ARGUMENT") == 1
    assert keda.fake.fetches == []
    assert len(keda.scaler.provider.cache) == 0


async def test_get_metrics_for_another_metric_name_is_invalid_argument(make_keda: MakeKeda) -> None:
    """KEDA asks GetMetrics by the name GetMetricSpec returned; any other name is refused, not guessed."""
    keda = await make_keda()
    request = pb.GetMetricsRequest(scaledObjectRef=ref(**INFLIGHT), metricName="vllm_requests_waiting")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await keda.stub.GetMetrics(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "metricName 'vllm_requests_waiting'" in (caught.value.details() or "")


async def test_stream_metric_spec_is_unimplemented(make_keda: MakeKeda) -> None:
    """StreamMetricSpec answers UNIMPLEMENTED, which makes KEDA poll GetMetricSpec."""
    keda = await make_keda()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await keda.stub.StreamMetricSpec(ref(**INFLIGHT)).read()
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert keda.calls("StreamMetricSpec", "UNIMPLEMENTED") == 1


async def test_an_unexpected_bug_is_internal_without_its_text(
    make_keda: MakeKeda, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug between the provider and the wire is INTERNAL with a generic message, never a value.
    (A bug inside a source is already SourceUnavailable, from the cache.)"""
    keda = await make_keda()

    async def broken(*_: object) -> object:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(keda.scaler.provider, "get", broken)
    calls: dict[str, RPC] = {
        "IsActive": lambda: keda.stub.IsActive(ref(**INFLIGHT)),
        "StreamIsActive": lambda: keda.stub.StreamIsActive(ref(**INFLIGHT)).read(),
    }
    for method, call in calls.items():
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call()
        assert caught.value.code() == grpc.StatusCode.INTERNAL
        assert "secret" not in (caught.value.details() or "")
        assert keda.calls(method, "INTERNAL") == 1


def test_error_classes_all_map_to_a_deliberate_code() -> None:
    """Every AdapterError subclass maps to a code other than UNKNOWN; 503s to UNAVAILABLE."""
    from adapter.keda.status import code_of

    def subclasses(cls: type[AdapterError]) -> list[type[AdapterError]]:
        return [cls, *(s for sub in cls.__subclasses__() for s in subclasses(sub))]

    for cls in subclasses(AdapterError):
        code = code_of(cls("x"))
        assert code != grpc.StatusCode.UNKNOWN
        if cls.code == 503:
            assert code == grpc.StatusCode.UNAVAILABLE, cls
