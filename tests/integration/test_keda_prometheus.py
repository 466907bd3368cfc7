"""The KEDA external scaler of a real adapter process over a real Prometheus, through a real grpcio client.

Two `vllm-autoscale serve --keda-port` processes read one real Prometheus (Debian package) that
scrapes exposition servers (`honor_timestamps: true`): one with `--client-ca-file` (mutual TLS on the
gRPC port), one without (TLS only). KEDA is played by `grpcio` with the client certificate a
TriggerAuthentication would hold; the same certificate reads the HTTP API (authorized by
`tests.kubeapi_fake.FakeKubeAPI`, since no kube-apiserver can run here). Each namespace is a situation:

| namespace | pods                                            | answer on both front ends         |
|-----------|-------------------------------------------------|-----------------------------------|
| prod      | two llama pods and a qwen pod, current samples  | values, equal on both             |
| old       | samples stamped 137 s old (max_age 90 s)        | 503 / UNAVAILABLE `stale`         |
| gap       | one pod lacks `vllm:num_requests_waiting`       | 503 / UNAVAILABLE `gauge_gap`     |
| nan       | a pod reports KV usage NaN                      | 503 / UNAVAILABLE `gauge_gap`     |
| idle      | a pod that served no request                    | TPOT is on_empty: 0 on both       |
| switch    | a pod whose queue the test fills and empties    | StreamIsActive follows it         |
"""

from __future__ import annotations

import asyncio
import itertools
import math
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from typing import Any

import grpc
import pytest
import pytest_asyncio

from adapter.vocabulary import catalogue
from tests.certs import CA
from tests.integration import procs
from tests.keda.harness import (
    PKI,
    Adapter,
    answer,
    reason,
    running_adapter,
    secure_channel,
    stub_of,
    trigger,
)
from tests.kubeapi_fake import FakeKubeAPI
from tests.vllm_pages import PodLoad, page
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

STALE_SECONDS = 137.0
# A value follows a page change after a scrape (1 s), a refresh (1 s) and a StreamIsActive read (1 s).
FOLLOW_SECONDS = 30.0
CONFIG = (
    "prometheus: {{url: '{url}', refresh_interval: 1s, timeout: 2s, max_age: 90s}}\n"
    "cache: {{max_keys: 40, idle_timeout: 3s}}\n"
    "metrics: {{vllm_ttft_seconds: {{window: 1m}}, vllm_tpot_seconds: {{window: 1m}}}}\n"
    "logging: {{level: info}}\n"
)
SWITCH = PodLoad("llama", running=0, waiting=0, kv_usage=0.1)


def _stamped(text: str, seconds_old: float) -> str:
    millis = int((time.time() - seconds_old) * 1000)
    return "".join(
        line if line.startswith("#") or not line.strip() else f"{line.rstrip()} {millis}\n"
        for line in text.splitlines(keepends=True)
    )


def _pod(load: PodLoad, *, seconds_old: float = 0.0, drop: str = "") -> Callable[[], str]:
    def render() -> str:
        text = page(load)
        if drop:
            text = "".join(
                line for line in text.splitlines(keepends=True) if not re.match(rf"(# \w+ )?{drop}\b", line)
            )
        return _stamped(text, seconds_old) if seconds_old else text

    return render


PODS: dict[str, tuple[str, Callable[[], str]]] = {
    "llama-a": ("prod", _pod(PodLoad("llama", running=10, waiting=4, kv_usage=0.5, requests_per_second=20))),
    "llama-b": (
        "prod",
        _pod(PodLoad("llama", running=6, waiting=1, kv_usage=0.3, requests_per_second=10, tpot_mean=0.05)),
    ),
    "qwen-a": ("prod", _pod(PodLoad("qwen", running=3, waiting=9, kv_usage=0.9, requests_per_second=5))),
    "old-a": ("old", _pod(PodLoad("llama", running=7, waiting=3, kv_usage=0.5), seconds_old=STALE_SECONDS)),
    "gap-a": ("gap", _pod(PodLoad("llama", running=7, waiting=3, kv_usage=0.5))),
    "gap-b": (
        "gap",
        _pod(PodLoad("llama", running=7, waiting=3, kv_usage=0.5), drop="vllm:num_requests_waiting"),
    ),
    "nan-a": ("nan", _pod(PodLoad("llama", running=1, kv_usage=math.nan))),
    "idle-a": ("idle", _pod(PodLoad("llama"))),
    "switch-a": ("switch", lambda: page(SWITCH)),
}


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[procs.Process]:
    """A real Prometheus honouring the pods' own timestamps, after three scrapes of every pod."""
    server = procs.ExpositionServer()
    scrape_configs = [
        {
            "job_name": pod,
            "honor_timestamps": True,
            "static_configs": [
                {
                    "targets": [f"127.0.0.1:{server.add(pod, render)}"],
                    "labels": {"namespace": namespace, "pod": pod},
                }
            ],
        }
        for pod, (namespace, render) in PODS.items()
    ]
    try:
        with procs.prometheus(tmp_path_factory.mktemp("prometheus"), scrape_configs) as process:
            procs.wait_for(
                lambda: len(procs.prometheus_query(process.url, "count_over_time(up[1m]) >= 3")) == len(PODS),
                60,
                what="three scrapes of every pod",
            )
            yield process
    finally:
        server.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kube(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[FakeKubeAPI]:
    async with FakeKubeAPI.running(tmp_path_factory.mktemp("kube")) as fake:
        yield fake


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return PKI(tmp_path_factory.mktemp("pki"))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mutual(
    prom: procs.Process, kube: FakeKubeAPI, pki: PKI, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Adapter]:
    """The adapter with --client-ca-file: mutual TLS on the gRPC port."""
    async with running_adapter(
        tmp_path_factory.mktemp("mutual"), pki, kube, CONFIG.format(url=prom.url), mutual=True
    ) as adapter:
        yield adapter


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tls_only(
    prom: procs.Process, kube: FakeKubeAPI, pki: PKI, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Adapter]:
    """The adapter without --client-ca-file: server-authenticated TLS on the gRPC port."""
    async with running_adapter(
        tmp_path_factory.mktemp("tls"), pki, kube, CONFIG.format(url=prom.url), mutual=False
    ) as adapter:
        yield adapter


QUESTIONS = [(m.name, "model_name=llama") for m in catalogue.BUILTIN] + [
    ("vllm_requests_inflight", "model_name in (llama,qwen)"),
    ("vllm_requests_waiting", "model_name!=llama"),
    ("vllm_kv_cache_usage", ""),
]


@pytest.mark.parametrize(("metric", "selector"), QUESTIONS, ids=[f"{m} {s}" for m, s in QUESTIONS])
async def test_get_metrics_equals_the_http_api(mutual: Adapter, metric: str, selector: str) -> None:
    """For every built-in metric, GetMetrics' metricValueFloat is the HTTP API's value for the same
    metric, namespace and selector, and metricValue its rounded integer."""
    item, http = await mutual.same_value(metric, "prod", selector, FOLLOW_SECONDS)
    assert item.metricName == metric
    assert item.metricValue == round(http)
    assert http > 0


async def test_every_rpc_over_mutual_tls(mutual: Adapter, pki: PKI) -> None:
    """KEDA's calls with its client certificate: spec, metrics, activity (polled and streamed);
    StreamMetricSpec is UNIMPLEMENTED. Without a certificate, or with another CA's, no handshake."""
    await every_rpc(mutual)
    for client in (None, CA("stranger").issue("keda-operator")):
        async with secure_channel(mutual.keda_port, pki, client) as channel:
            refused = await answer(stub_of(channel).IsActive(trigger("vllm_requests_waiting"), timeout=10))
        assert isinstance(refused, grpc.aio.AioRpcError)
        assert refused.code() == grpc.StatusCode.UNAVAILABLE


async def test_every_rpc_over_tls_only(tls_only: Adapter, pki: PKI) -> None:
    """Without a client CA the gRPC port is TLS only: every RPC answers a client with no certificate,
    and a client that does not trust the serving CA fails its handshake."""
    async with secure_channel(tls_only.keda_port, pki, None) as channel:
        anonymous = replace(tls_only, channel=channel)
        await every_rpc(anonymous)
    untrusting = PKI(pki.directory / "other")
    async with secure_channel(tls_only.keda_port, untrusting, None) as channel:
        refused = await answer(stub_of(channel).IsActive(trigger("vllm_requests_waiting"), timeout=10))
    assert isinstance(refused, grpc.aio.AioRpcError)
    assert refused.code() == grpc.StatusCode.UNAVAILABLE


async def every_rpc(adapter: Adapter) -> None:
    ref = trigger("vllm_requests_inflight", "prod", "model_name=llama", target="12.5", activationTarget="20")
    spec = await adapter.stub.GetMetricSpec(ref, timeout=10)
    assert [(s.metricName, s.targetSizeFloat, s.targetSize) for s in spec.metricSpecs] == [
        ("vllm_requests_inflight", 12.5, 13)
    ]
    _item, http = await adapter.same_value(
        "vllm_requests_inflight", "prod", "model_name=llama", FOLLOW_SECONDS
    )
    assert http == 21.0
    assert (await adapter.stub.IsActive(ref, timeout=10)).result is True, "21 in flight > activationTarget 20"
    quiet = trigger("vllm_requests_inflight", "prod", "model_name=llama", activationTarget="21")
    assert (await adapter.stub.IsActive(quiet, timeout=10)).result is False, "21 is not above 21"
    stream = adapter.stub.StreamIsActive(ref)
    assert (await stream.read()).result is True
    stream.cancel()
    unimplemented = await answer(adapter.stub.StreamMetricSpec(ref).read())
    assert isinstance(unimplemented, grpc.aio.AioRpcError)
    assert unimplemented.code() == grpc.StatusCode.UNIMPLEMENTED


ROWS = [
    pytest.param("vllm_requests_waiting", "old", "", 503, grpc.StatusCode.UNAVAILABLE, "stale", id="stale"),
    pytest.param(
        "vllm_requests_inflight",
        "gap",
        "",
        503,
        grpc.StatusCode.UNAVAILABLE,
        "gauge_gap",
        id="gauge family absent on a present pod",
    ),
    pytest.param(
        "vllm_kv_cache_usage", "nan", "", 503, grpc.StatusCode.UNAVAILABLE, "gauge_gap", id="NaN gauge"
    ),
    pytest.param(
        "vllm_requests_waiting",
        "prod",
        "model_name=nobody",
        503,
        grpc.StatusCode.UNAVAILABLE,
        "no_targets",
        id="no targets for the selector",
    ),
    pytest.param(
        "vllm_requests_waiting",
        "nowhere",
        "",
        503,
        grpc.StatusCode.UNAVAILABLE,
        "no_targets",
        id="no targets in the namespace",
    ),
    pytest.param("cpu_usage", "prod", "", 404, grpc.StatusCode.NOT_FOUND, "not_found", id="unknown metric"),
    pytest.param(
        "vllm_requests_waiting",
        "prod",
        "model_name>3",
        400,
        grpc.StatusCode.INVALID_ARGUMENT,
        "bad_metadata",
        id="selector operator metrics cannot support",
    ),
    pytest.param(
        "vllm_requests_waiting",
        "Prod",
        "",
        400,
        grpc.StatusCode.INVALID_ARGUMENT,
        "bad_metadata",
        id="namespace that is not a DNS label",
    ),
]


@pytest.mark.parametrize(("metric", "namespace", "selector", "http_status", "code", "row"), ROWS)
async def test_failure_rows_are_errors_on_both_front_ends(
    mutual: Adapter,
    metric: str,
    namespace: str,
    selector: str,
    http_status: int,
    code: grpc.StatusCode,
    row: str,
) -> None:
    """Each situation that is an HTTP error is the corresponding gRPC error on GetMetrics and IsActive,
    with the reason in the trailing metadata: never a value KEDA could scale on."""
    status, body = await mutual.http(metric, namespace, selector)
    assert status == http_status, body
    ref = trigger(metric, namespace, selector)
    for call in (mutual.get_metrics(ref), answer(mutual.stub.IsActive(ref, timeout=10))):
        error = await call
        assert isinstance(error, grpc.aio.AioRpcError), error
        assert error.code() == code
        assert reason(error) == row
        if http_status == 503:
            assert error.details() == body["message"], "the HTTP API's generic message"


async def test_no_events_is_the_on_empty_value_on_both(mutual: Adapter) -> None:
    """A pod that served nothing: mean TPOT is on_empty (0), a value on both front ends, and inactive."""
    item, http = await mutual.same_value("vllm_tpot_seconds", "idle", "", FOLLOW_SECONDS)
    assert item.metricValueFloat == http == 0.0
    assert (await mutual.stub.IsActive(trigger("vllm_tpot_seconds", "idle"), timeout=10)).result is False


async def test_stream_is_active_follows_the_queue(mutual: Adapter) -> None:
    """StreamIsActive sends the state at once, then each change as Prometheus sees the queue fill and
    empty, never faster than the refresh interval, and nothing while the state holds."""
    stream = mutual.stub.StreamIsActive(trigger("vllm_requests_waiting", "switch"))
    received: list[tuple[float, bool]] = []

    async def next_state() -> bool:
        message = await asyncio.wait_for(stream.read(), FOLLOW_SECONDS)
        # grpc-stubs 1.53 omits grpc.aio.EOF, the sentinel grpcio's aio calls return at the end of a stream
        assert message is not grpc.aio.EOF, await stream.details()  # type: ignore[attr-defined]
        received.append((time.monotonic(), message.result))
        return bool(message.result)

    try:
        assert await next_state() is False
        SWITCH.waiting = 5
        assert await next_state() is True
        SWITCH.waiting = 0
        assert await next_state() is False
    finally:
        SWITCH.waiting = 0
        stream.cancel()
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(received)]
    assert min(gaps) >= 0.95, f"changes sent faster than the 1 s refresh interval: {gaps}"


async def test_prometheus_down_is_unavailable_then_recovers(mutual: Adapter, prom: procs.Process) -> None:
    """With Prometheus stopped, every RPC answering values is UNAVAILABLE `source_unavailable` (HTTP 503)
    and an open stream ends with that error; once it is back, values return."""
    ref = trigger("vllm_requests_waiting", "prod", "model_name=llama")
    stream = mutual.stub.StreamIsActive(ref)
    assert (await stream.read()).result is True
    prom.stop()
    try:

        async def down() -> Any:
            outcome = await mutual.get_metrics(ref)
            return (
                isinstance(outcome, grpc.aio.AioRpcError)
                and reason(outcome) == "source_unavailable"
                and outcome
            )

        error = await eventually(down, FOLLOW_SECONDS, "the refresh after Prometheus stopped")
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert (await mutual.http("vllm_requests_waiting", "prod", "model_name=llama"))[0] == 503
        ended = await asyncio.wait_for(answer(stream.read()), FOLLOW_SECONDS)
        assert isinstance(ended, grpc.aio.AioRpcError), ended
        assert ended.code() == grpc.StatusCode.UNAVAILABLE
        assert reason(ended) == "source_unavailable"
    finally:
        await asyncio.to_thread(procs.restart, prom)

    async def back() -> bool:
        outcome = await mutual.get_metrics(ref)
        return (
            not isinstance(outcome, grpc.aio.AioRpcError) and outcome.metricValues[0].metricValueFloat == 5.0
        )

    await eventually(back, FOLLOW_SECONDS * 2, "values after Prometheus restarted")


async def test_too_many_keys_is_resource_exhausted_then_recovers(mutual: Adapter) -> None:
    """A flood of selectors that match nothing never locks out a key with targets (each new one takes
    the place of the oldest empty key); once cache.max_keys keys all have targets, a new selector is
    RESOURCE_EXHAUSTED (HTTP 429), and after they idle out a new key is served again. It runs last in
    this module: the keys it makes would leave no room for the keys of a test after it."""
    for i in range(45):
        outcome = await answer(
            mutual.stub.IsActive(trigger("vllm_requests_waiting", "prod", f"model_name=k{i}"), timeout=10)
        )
        assert isinstance(outcome, grpc.aio.AioRpcError), "no pod has these models"
        assert outcome.code() == grpc.StatusCode.UNAVAILABLE, f"empty key {i}: {outcome}"
    exhausted = None
    for i in range(45):
        # `tier!=...` matches every llama pod (they carry no tier): a new key with targets each time.
        selector = f"model_name=llama,tier!=t{i}"
        outcome = await answer(
            mutual.stub.IsActive(trigger("vllm_requests_waiting", "prod", selector), timeout=10)
        )
        if isinstance(outcome, grpc.aio.AioRpcError):
            exhausted = outcome
            break
    assert exhausted is not None and exhausted.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exhausted
    assert reason(exhausted) == "too_many_keys"
    assert (await mutual.http("vllm_requests_waiting", "prod", "model_name=another"))[0] == 429

    async def served_again() -> bool:
        outcome = await answer(
            mutual.stub.IsActive(
                trigger("vllm_requests_waiting", "prod", "model_name in (llama,z)"), timeout=10
            )
        )
        return not isinstance(outcome, grpc.aio.AioRpcError) and outcome.result

    await eventually(served_again, FOLLOW_SECONDS, "the keys to idle out")
