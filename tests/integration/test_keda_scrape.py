"""The KEDA external scaler of a real adapter process on the scrape source, over emulated vLLM replicas.

`vllm-autoscale emulate` runs two replicas of model `llama` (real time); two `vllm-autoscale serve
--source scrape --keda-port` processes scrape them directly:

- **mutual** (`--client-ca-file`: mutual TLS on the gRPC port) scrapes both replicas;
- **partial** (TLS only) scrapes one replica and a port where nothing listens (`on_partial: error`).

Load comes from `lab.demo.loadgen` (Poisson arrivals of short requests) sent to the replicas'
`/v1/completions`. A real `grpcio` client plays KEDA; the HTTP API is read with the same client
certificate (authorized by `tests.kubeapi_fake.FakeKubeAPI`: no kube-apiserver can run here).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import grpc
import pytest
import pytest_asyncio

from lab.demo.loadgen import RequestShape, Scenario, Stage, arrivals, prompt_token_ids
from tests.integration import procs
from tests.integration.test_emulator_prometheus import emulator
from tests.keda.harness import PKI, Adapter, answer, reason, running_adapter, trigger
from tests.kubeapi_fake import FakeKubeAPI
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

# A state change reaches the stream after a scrape (1 s), a refresh and a read (1 s each), plus the
# time a loaded machine adds; every wait returns as soon as it can.
FOLLOW_SECONDS = 30.0
#: requests of about 1-2 s on the emulator (1.5-2 ms per token), so in-flight work drains within
#: seconds once arrivals stop
SHAPE = RequestShape(
    prompt_min=100, prompt_max=300, shared_prefix_fraction=0.0, max_tokens_min=600, max_tokens_max=1200
)
#: 8 requests/s over two replicas keep about 12 in flight: never none at a scrape while load runs
RATE = 8.0
SCRAPE = (
    "source: scrape\nscrape: {{targets: {targets}, namespace: prod, interval: 1s, timeout: 800ms{extra}}}\n"
)
METRICS = [
    "vllm_requests_inflight",
    "vllm_requests_running",
    "vllm_requests_waiting",
    "vllm_kv_cache_usage",
    "vllm_tpot_seconds",
    "vllm_ttft_seconds",
]


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """`vllm-autoscale emulate --replicas 2 --model llama`: the replicas' host:port addresses."""
    with emulator(tmp_path_factory.mktemp("emulator"), "0.33", 2) as addresses:
        yield addresses


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kube(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[FakeKubeAPI]:
    async with FakeKubeAPI.running(tmp_path_factory.mktemp("kube")) as fake:
        yield fake


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return PKI(tmp_path_factory.mktemp("pki"))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mutual(
    replicas: list[str], kube: FakeKubeAPI, pki: PKI, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Adapter]:
    targets = [f"http://{address}/metrics" for address in replicas]
    config = SCRAPE.format(targets=targets, extra="")
    async with running_adapter(tmp_path_factory.mktemp("mutual"), pki, kube, config, mutual=True) as adapter:
        yield adapter


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def partial(
    replicas: list[str], kube: FakeKubeAPI, pki: PKI, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Adapter]:
    targets = [f"http://{replicas[0]}/metrics", f"http://127.0.0.1:{procs.free_port()}/metrics"]
    config = SCRAPE.format(targets=targets, extra=", on_partial: error")
    async with running_adapter(
        tmp_path_factory.mktemp("partial"), pki, kube, config, mutual=False
    ) as adapter:
        yield adapter


async def send_load(replicas: list[str], seconds: float, seed: int) -> int:
    """Poisson arrivals from `lab.demo.loadgen` for `seconds`, round robin over the replicas, each
    request awaited to its end; returns how many completed."""
    profile = Scenario("keda-test", (Stage("load", seconds, 1.0),), "constant load", time_scale=1.0)
    targets = itertools.cycle(replicas)
    started = time.monotonic()
    completed = 0

    async def send(session: aiohttp.ClientSession, address: str, body: dict[str, Any]) -> None:
        nonlocal completed
        async with session.post(f"http://{address}/v1/completions", json=body) as response:
            assert response.status == 200, await response.text()
            completed += 1

    async with aiohttp.ClientSession() as session, asyncio.TaskGroup() as group:
        for arrival in arrivals(profile, RATE, seed=seed, shape=SHAPE):
            await asyncio.sleep(max(0.0, started + arrival.at - time.monotonic()))
            body = {
                "model": "llama",
                "prompt": prompt_token_ids(arrival),
                "max_tokens": arrival.max_tokens,
                "ignore_eos": True,
            }
            group.create_task(send(session, next(targets), body))
    return completed


async def test_stream_is_active_follows_load_on_the_emulator(mutual: Adapter, replicas: list[str]) -> None:
    """StreamIsActive on requests in flight: inactive while idle, active soon after load starts,
    inactive once it stops and drains, then silent while the state holds; every message a change, at
    most one per refresh interval."""
    stream = mutual.stub.StreamIsActive(trigger("vllm_requests_inflight", "prod", "model_name=llama"))
    received: list[tuple[float, bool]] = []
    arrived = asyncio.Event()

    async def read_all() -> None:
        async for message in stream:
            received.append((time.monotonic(), bool(message.result)))
            arrived.set()

    async def states(predicate: Any) -> bool:
        return bool(received) and predicate([state for _, state in received])

    reader = asyncio.create_task(read_all())
    try:
        await eventually(lambda: states(lambda s: True), FOLLOW_SECONDS, "the current state at once")
        assert received[0][1] is False, "idle replicas: nothing in flight"
        load = asyncio.create_task(send_load(replicas, 10.0, seed=1))
        try:
            await eventually(lambda: states(lambda s: True in s), FOLLOW_SECONDS, "active under load")
        finally:
            completed = await load
        assert completed > 30
        await eventually(lambda: states(lambda s: s[-1] is False), FOLLOW_SECONDS, "inactive once drained")
        arrived.clear()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(arrived.wait(), 3.0)  # nothing is sent while the state holds
    finally:
        stream.cancel()
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    assert [state for _, state in received] == [False, True, False], received
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(received)]
    assert min(gaps) >= 0.95, f"changes sent faster than the 1 s refresh interval: {gaps}"


async def test_values_equal_the_http_api_under_load(mutual: Adapter, replicas: list[str]) -> None:
    """While the emulator serves load, every built-in metric's GetMetrics value is the HTTP API's for
    the same key (read back to back within one refresh), and IsActive agrees with it."""
    load = asyncio.create_task(send_load(replicas, 12.0, seed=2))
    try:

        async def busy() -> bool:
            return await mutual.http_value("vllm_requests_inflight", "prod", "model_name=llama") > 0

        await eventually(busy, FOLLOW_SECONDS, "requests in flight")
        for metric in METRICS:
            item, http = await mutual.same_value(metric, "prod", "model_name=llama", FOLLOW_SECONDS)
            assert item.metricValue == round(http)
        busy_trigger = trigger("vllm_requests_inflight", "prod", "model_name=llama", activationTarget="0")
        assert (await mutual.stub.IsActive(busy_trigger, timeout=10)).result is True
        spec = await mutual.stub.GetMetricSpec(trigger("vllm_requests_inflight", target="8"), timeout=10)
        assert [(s.metricName, s.targetSizeFloat) for s in spec.metricSpecs] == [
            ("vllm_requests_inflight", 8.0)
        ]
        unimplemented = await answer(mutual.stub.StreamMetricSpec(trigger("vllm_requests_inflight")).read())
        assert isinstance(unimplemented, grpc.aio.AioRpcError)
        assert unimplemented.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await load


ROWS = [
    pytest.param(
        "vllm_requests_waiting",
        "prod",
        "model_name=llama",
        503,
        grpc.StatusCode.UNAVAILABLE,
        "partial",
        id="one of two pods unreachable under on_partial error",
    ),
    pytest.param(
        "vllm_requests_waiting",
        "prod",
        "model_name=nobody",
        503,
        grpc.StatusCode.UNAVAILABLE,
        "source_unavailable",
        id="every pod that may hold the series failed",
    ),
    pytest.param(
        "vllm_requests_waiting",
        "elsewhere",
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
        "model_name<3",
        400,
        grpc.StatusCode.INVALID_ARGUMENT,
        "bad_metadata",
        id="selector operator metrics cannot support",
    ),
]


@pytest.mark.parametrize(("metric", "namespace", "selector", "http_status", "code", "row"), ROWS)
async def test_failure_rows_are_errors_over_tls(
    partial: Adapter,
    metric: str,
    namespace: str,
    selector: str,
    http_status: int,
    code: grpc.StatusCode,
    row: str,
) -> None:
    """On the scrape source, each failure is the same error on both front ends (gRPC over TLS without a
    client certificate here): never a value KEDA could scale on."""
    ref = trigger(metric, namespace, selector)

    async def settled() -> Any:
        # Until both targets have been tried once the source says "not scraped yet" for everything.
        error = await answer(partial.stub.IsActive(ref, timeout=10))
        return isinstance(error, grpc.aio.AioRpcError) and reason(error) == row and error

    error = await eventually(settled, FOLLOW_SECONDS, f"the {row} answer")
    assert error.code() == code
    status, body = await partial.http(metric, namespace, selector)
    assert status == http_status, body
    metrics = await partial.get_metrics(ref)
    assert isinstance(metrics, grpc.aio.AioRpcError)
    assert (metrics.code(), reason(metrics)) == (code, row)
    if http_status == 503:
        assert metrics.details() == body["message"]
