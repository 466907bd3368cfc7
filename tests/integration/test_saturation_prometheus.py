"""`vllm_saturation` served from a real Prometheus and from the scrape source, on the same pages.

A real Prometheus (Debian's, on loopback) scrapes exposition pages whose gauges the test sets
(tests/saturation_fleet.py, plus a pod whose exporter lost its waiting gauge); the scrape source
reads the very same pages. One application per source (create_app) is asked through its HTTP API,
as the HPA asks: both must serve the hand-computed value, to the milli-unit the HPA reads, follow a
change of load, and refuse the broken pod alike (503, never a number).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from adapter.app import create_app
from adapter.config import load
from adapter.vocabulary.quantity import parse_quantity
from tests.integration import procs
from tests.saturation_fleet import FLEET, NAMESPACE, Engine, exposition
from tests.waiting import eventually

pytestmark = pytest.mark.integration

API = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NAMESPACE}"
METRICS = (
    "metrics:\n"
    "  vllm_saturation: {capacity: 10, kv_target: 0.8, queue_target: 4}\n"
    "  saturation_inflight: {capacity: 10}\n"
)
#: a pod whose exporter reports running requests and KV usage but no waiting family
BROKEN = (
    'vllm:num_requests_running{engine="0",model_name="broken"} 3.0\n'
    'vllm:kv_cache_usage_perc{engine="0",model_name="broken"} 0.5\n'
)
#: the load of a pod the tests change while both sources read it (its own model, "moving")
MOVING: dict[str, tuple[Engine, ...]] = {"moving-a": (Engine("moving", 4, 0, 0.2),)}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    server = procs.ExpositionServer()
    ports = {pod: server.add(pod, functools.partial(exposition, engines)) for pod, engines in FLEET.items()}
    ports["moving-a"] = server.add("moving-a", lambda: exposition(MOVING["moving-a"]))
    ports["broken"] = server.add("broken", lambda: BROKEN)
    scrape_configs = [
        {
            "job_name": "vllm",
            "scrape_interval": "1s",
            "static_configs": [
                {"targets": [f"127.0.0.1:{port}"], "labels": {"namespace": NAMESPACE, "pod": pod}}
                for pod, port in ports.items()
            ],
        }
    ]
    try:
        with procs.prometheus(Path(tmp_path_factory.mktemp("prom")), scrape_configs) as prom:
            procs.wait_for(
                lambda: len(procs.prometheus_query(prom.url, "up == 1")) == len(ports),
                60,
                what="a scrape of every pod",
            )
            yield {
                "prometheus": prom.url,
                "targets": [f"http://127.0.0.1:{p}/metrics" for p in ports.values()],
            }
    finally:
        server.close()


@pytest.fixture
async def clients(fleet: dict[str, Any]) -> AsyncIterator[dict[str, TestClient[Any, Any]]]:
    configs = {
        "prometheus": load(METRICS + f"prometheus: {{url: '{fleet['prometheus']}', refresh_interval: 1s}}\n"),
        "scrape": load(
            METRICS + "source: scrape\n"
            f"scrape: {{targets: {fleet['targets']}, namespace: "
            f"{NAMESPACE}, interval: 500ms, timeout: 400ms}}\n"
        ),
        "unconfigured": load(f"prometheus: {{url: '{fleet['prometheus']}', refresh_interval: 1s}}\n"),
    }
    opened: dict[str, TestClient[Any, Any]] = {}
    try:
        for name, config in configs.items():
            opened[name] = TestClient(TestServer(create_app(config)))
            await opened[name].start_server()
        yield opened
    finally:
        for client in opened.values():
            await client.close()


async def _answer(client: TestClient[Any, Any], metric: str, selector: str) -> tuple[int, dict[str, Any]]:
    response = await client.get(f"{API}/{metric}", params={"labelSelector": selector})
    body: dict[str, Any] = await response.json()
    return response.status, body


async def _served(client: TestClient[Any, Any], metric: str, selector: str) -> bool:
    return (await _answer(client, metric, selector))[0] == 200


async def _value(client: TestClient[Any, Any], metric: str, selector: str, expected: float) -> float:
    """The served value once it is `expected` to the milli-unit (a source may still be warming up or
    holding the previous load); fails naming the last answer when the deadline passes."""

    async def served() -> tuple[float] | None:
        status, body = await _answer(client, metric, selector)
        if status != 200:
            return None
        value = parse_quantity(body["items"][0]["value"])
        return (value,) if abs(value - expected) < 0.0015 else None  # a tuple, so 0.0 counts

    (value,) = await eventually(
        served, within=20, what=f"{metric} {{{selector}}} at {expected:g}", interval=0.25
    )
    return value


QUESTIONS = [
    # the hand-computed fleet of tests/saturation_fleet.py: each llama pod bound by another term
    ("vllm_saturation", "model_name=llama", (0.8 + 0.95 + 1.5) / 3),
    # inflight alone: (8 + 4 + 12) requests over 3 pods of 10
    ("saturation_inflight", "model_name=llama", 24 / 30),
    # one pod: max(39/10, 0.99/0.8, 9/4)
    ("vllm_saturation", "model_name=qwen", 3.9),
    ("vllm_saturation", "model_name in (llama,qwen)", (0.8 + 0.95 + 1.5 + 3.9) / 4),
]


@pytest.mark.parametrize(
    ("metric", "selector", "expected"), QUESTIONS, ids=[f"{m} {s}" for m, s, _ in QUESTIONS]
)
async def test_both_sources_serve_the_hand_computed_value(
    clients: dict[str, TestClient[Any, Any]], metric: str, selector: str, expected: float
) -> None:
    """The Prometheus source (PromQL in a real Prometheus) and the scrape source (the same arithmetic
    in the adapter) serve the same value, the one worked out by hand."""
    from_prometheus = await _value(clients["prometheus"], metric, selector, expected)
    from_scrape = await _value(clients["scrape"], metric, selector, expected)
    assert from_prometheus == pytest.approx(expected, abs=0.0015)
    assert from_scrape == pytest.approx(from_prometheus, abs=0.0015)


async def test_both_sources_follow_a_change_of_load(clients: dict[str, TestClient[Any, Any]]) -> None:
    """A pod going from 4 running requests (0.4) to 12 running and 6 waiting with KV at 0.6 (inflight
    binds: 18/10 = 1.8, above the queue's 6/4 = 1.5 and KV's 0.75) is seen at its new value by both
    sources."""
    before = 0.4
    for source in ("prometheus", "scrape"):
        assert await _value(clients[source], "vllm_saturation", "model_name=moving", before) == pytest.approx(
            before, abs=0.0015
        )
    MOVING["moving-a"] = (Engine("moving", 12, 6, 0.6),)
    try:
        for source in ("prometheus", "scrape"):
            after = await _value(clients[source], "vllm_saturation", "model_name=moving", 1.8)
            assert after == pytest.approx(1.8, abs=0.0015), source
    finally:
        MOVING["moving-a"] = (Engine("moving", 4, 0, 0.2),)


async def test_a_missing_gauge_is_refused_alike(clients: dict[str, TestClient[Any, Any]]) -> None:
    """The broken pod lacks the waiting gauge: 503 from both sources, never a number (the KV term
    alone would have given 0.625)."""
    answers = []
    for source in ("prometheus", "scrape"):
        # The outward message never says "warming up" (errors.py keeps causes out of it): a source
        # is warm once it serves a healthy model's gauge; the refusal is read after that, once.
        await eventually(
            functools.partial(_served, clients[source], "vllm_saturation", "model_name=llama"),
            within=20,
            what=f"{source} warm",
            interval=0.25,
        )
        status, body = await _answer(clients[source], "vllm_saturation", "model_name=broken")
        answers.append((status, body.get("message")))
    assert answers[0] == answers[1]
    assert answers[0] == (
        503,
        "unable to fetch external metric 'vllm_saturation': "
        "a target does not report a gauge the metric needs",
    )


async def test_served_only_once_configured(clients: dict[str, TestClient[Any, Any]]) -> None:
    """Discovery names it when configured; without a capacity it does not exist (404 NotFound)."""
    listed = await (await clients["prometheus"].get("/apis/external.metrics.k8s.io/v1beta1")).json()
    assert {"vllm_saturation", "saturation_inflight"} <= {r["name"] for r in listed["resources"]}
    status, body = await _answer(clients["unconfigured"], "vllm_saturation", "model_name=llama")
    assert (status, body["reason"]) == (404, "NotFound")
