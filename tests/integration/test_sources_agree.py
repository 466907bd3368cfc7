"""Switching `--source` changes freshness, not meaning: both sources serve the same values.

One emulated fleet (exposition servers whose gauges are constant and whose counters and histograms
grow at constant rates, so every rate, mean and quantile is a constant however scrapes fall) is read
by a real Prometheus and, directly, by the scrape source. The same application (create_app) is built
once per source and asked the same questions through its HTTP API. Three pods with broken exporters
(a gauge family missing, a NaN, a +Inf) must be refused alike by both sources.
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
from tests.vllm_pages import PodLoad, page
from tests.waiting import eventually

FLEET = {
    "llama-a": PodLoad("llama", running=10, waiting=4, kv_usage=0.5, requests_per_second=20, tpot_mean=0.02),
    "llama-b": PodLoad(
        "llama", running=6, waiting=1, kv_usage=0.25, requests_per_second=10, tpot_mean=0.05, old=True
    ),
    "llama-c": PodLoad(
        "llama", running=8, waiting=2, kv_usage=0.75, requests_per_second=10, tpot_mean=0.03, engines=2
    ),
    "qwen-a": PodLoad("qwen", running=3, waiting=9, kv_usage=0.9, requests_per_second=5, tpot_mean=0.1),
}
# A pod whose exporter is broken: it reports running requests but no waiting family, and a NaN KV
# usage. Both sources must answer 503 for what needs those gauges (never on_empty's 0), and the
# same number for what does not.
BROKEN = {
    "broken": 'vllm:num_requests_running{engine="0",model_name="broken"} 3.0\n'
    'vllm:kv_cache_usage_perc{engine="0",model_name="broken"} NaN\n',
    # one pod of a busy model reports waiting +Inf, the other 40: the fleet is busy, not idle
    "busy-inf": 'vllm:num_requests_running{engine="0",model_name="busy"} 1.0\n'
    'vllm:num_requests_waiting{engine="0",model_name="busy"} +Inf\n'
    'vllm:kv_cache_usage_perc{engine="0",model_name="busy"} 0.5\n',
    "busy-ok": 'vllm:num_requests_running{engine="0",model_name="busy"} 2.0\n'
    'vllm:num_requests_waiting{engine="0",model_name="busy"} 40.0\n'
    'vllm:kv_cache_usage_perc{engine="0",model_name="busy"} 0.7\n',
}
# vLLM's waiting queue broken down by reason (PR #38435; 0.26.0 and later, `data/vllm-0.26.0/`): the
# plain gauge counts the deferred requests too, which no new replica serves. A pod of a newer release
# beside one of an older release (plain gauge only), as during a rolling upgrade.
SPLIT = {
    "split-new": 'vllm:num_requests_running{engine="0",model_name="split"} 5.0\n'
    'vllm:num_requests_waiting{engine="0",model_name="split"} 7.0\n'
    'vllm:num_requests_waiting_by_reason{engine="0",model_name="split",reason="capacity"} 4.0\n'
    'vllm:num_requests_waiting_by_reason{engine="0",model_name="split",reason="deferred"} 3.0\n'
    'vllm:kv_cache_usage_perc{engine="0",model_name="split"} 0.5\n',
    "split-old": 'vllm:num_requests_running{engine="0",model_name="split"} 1.0\n'
    'vllm:num_requests_waiting{engine="0",model_name="split"} 2.0\n'
    'vllm:kv_cache_usage_perc{engine="0",model_name="split"} 0.5\n',
}
# The inference gateway's endpoint picker, scraped beside the pods (tests/data/llm-d-epp.metrics.txt,
# written from llm-d/llm-d-router's source: see its header).
EPP_PAGE = (Path(__file__).parents[1] / "data" / "llm-d-epp.metrics.txt").read_text(encoding="utf-8")
QUESTIONS = [
    ("vllm_requests_waiting", "model_name=llama"),
    ("vllm_requests_running", "model_name=llama"),
    ("vllm_requests_inflight", "model_name in (llama,qwen)"),
    ("vllm_requests_inflight", "model_name!=llama,model_name!=broken,model_name!=busy"),
    ("vllm_requests_running", "model_name=broken"),
    ("vllm_kv_cache_usage", "model_name=busy"),
    ("vllm_kv_cache_usage", "model_name=llama"),
    ("vllm_tpot_seconds", "model_name=llama"),
    ("vllm_ttft_seconds", "model_name=llama"),
    ("vllm_tpot_seconds", "model_name=qwen"),
]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    server = procs.ExpositionServer()
    targets = {pod: server.add(pod, functools.partial(page, load)) for pod, load in FLEET.items()}
    for pod, text in {**BROKEN, **SPLIT, "epp": EPP_PAGE}.items():
        targets[pod] = server.add(pod, functools.partial(str, text))  # the same text at every scrape
    scrape_configs = [
        {
            "job_name": "vllm",
            "static_configs": [
                {"targets": [f"127.0.0.1:{p}" for p in targets.values()], "labels": {"namespace": "prod"}}
            ],
        }
    ]
    try:
        with procs.prometheus(Path(tmp_path_factory.mktemp("prom")), scrape_configs) as prom:
            # Every pod scraped across a whole 30 s latency window (and two scrapes more): until then
            # Prometheus's rate() extrapolates each pod's counters over the part of the window its
            # samples cover, which differs from pod to pod, so a fleet's mean TPOT weights the pods
            # off their true rates (one CI run: 0.028 against the scrape source's exact 0.030).
            procs.wait_for(
                lambda: (
                    len(procs.prometheus_query(prom.url, "count_over_time(up[1m]) >= 32")) == len(targets)
                ),
                90,
                what="32 scrapes of every pod",
            )
            yield {
                "prometheus": prom.url,
                "targets": [f"http://127.0.0.1:{p}/metrics" for p in targets.values()],
            }
    finally:
        server.close()


@pytest.fixture
async def clients(fleet: dict[str, Any]) -> AsyncIterator[dict[str, TestClient[Any, Any]]]:
    windows = "metrics: {vllm_tpot_seconds: {window: 30s}, vllm_ttft_seconds: {window: 30s}}\n"
    prometheus = load(windows + f"prometheus: {{url: '{fleet['prometheus']}', refresh_interval: 1s}}")
    scrape = load(
        windows + "source: scrape\n"
        f"scrape: {{targets: {fleet['targets']}, namespace: prod, interval: 500ms, timeout: 400ms}}\n"
    )
    opened: dict[str, TestClient[Any, Any]] = {}
    try:
        for name, config in (("prometheus", prometheus), ("scrape", scrape)):
            opened[name] = TestClient(TestServer(create_app(config)))
            await opened[name].start_server()
        yield opened
    finally:
        for client in opened.values():
            await client.close()


async def _value(client: TestClient[Any, Any], metric: str, selector: str) -> float:
    """The served value, once there is one: the scrape source answers 503 until it holds two
    snapshots for a rate (and Prometheus until it has scraped)."""

    async def served() -> tuple[float] | None:
        response = await client.get(
            f"/apis/external.metrics.k8s.io/v1beta1/namespaces/prod/{metric}",
            params={"labelSelector": selector},
        )
        body = await response.json()
        if response.status != 200:
            return None
        return (parse_quantity(body["items"][0]["value"]),)  # a tuple, so 0.0 counts as served

    (value,) = await eventually(served, within=20, what=f"{metric} {{{selector}}} served", interval=0.25)
    return value


@pytest.mark.parametrize(("metric", "selector"), QUESTIONS, ids=[f"{m} {s}" for m, s in QUESTIONS])
async def test_both_sources_serve_the_same_value(
    clients: dict[str, TestClient[Any, Any]], metric: str, selector: str
) -> None:
    """The Prometheus source and the scrape source agree to the milli-unit the HPA reads."""
    from_prometheus = await _value(clients["prometheus"], metric, selector)
    from_scrape = await _value(clients["scrape"], metric, selector)
    assert from_scrape == pytest.approx(from_prometheus, abs=0.0015)
    assert from_prometheus > 0


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        pytest.param(
            "vllm_requests_waiting",
            4.0 + 2.0,
            id="waiting: capacity part of the new pod + plain gauge of the old",
        ),
        pytest.param(
            "vllm_requests_inflight", 5.0 + 4.0 + 1.0 + 2.0, id="inflight: running + waiting for capacity"
        ),
    ],
)
async def test_waiting_reads_the_capacity_reason_where_vllm_breaks_it_down(
    clients: dict[str, TestClient[Any, Any]], metric: str, expected: float
) -> None:
    """With `vllm:num_requests_waiting_by_reason` on a pod, its `reason="capacity"` series is that pod's
    waiting (7 waiting, 3 of them deferred, reads 4); a pod without it keeps the plain gauge. Both the
    real Prometheus and the scrape source serve exactly that."""
    for source in ("prometheus", "scrape"):
        assert await _value(clients[source], metric, "model_name=split") == expected, source


@pytest.mark.parametrize(
    ("metric", "selector", "expected"),
    [
        pytest.param(
            "gateway_queue_size",
            "inference_pool=pool-a",
            3.0,
            id="flow-control queue of a pool: current and deprecated twins counted once",
        ),
        pytest.param("gateway_queue_size", "inference_pool=pool-a,priority=10", 1.0, id="one priority band"),
        pytest.param(
            "gateway_queue_size",
            "inference_pool=pool-b",
            0.0,
            id="an idle pool has no queue series yet: empty, so on_empty 0, never a gap",
        ),
        pytest.param(
            "gateway_requests_running",
            "model_name=llama",
            5.0,
            id="running through the gateway; the model_name-only deprecated twin is not added",
        ),
    ],
)
async def test_gateway_metrics_from_the_endpoint_pickers_exposition(
    clients: dict[str, TestClient[Any, Any]], metric: str, selector: str, expected: float
) -> None:
    """The gateway's queue and concurrency, read from an EPP exposition, by both sources alike."""
    for source in ("prometheus", "scrape"):
        assert await _value(clients[source], metric, selector) == expected, source


@pytest.mark.parametrize(
    ("metric", "selector"),
    [("gateway_queue_size", "inference_pool=no-such-pool"), ("gateway_requests_running", "model_name=qwen")],
)
async def test_gateway_metrics_without_targets_are_503(
    clients: dict[str, TestClient[Any, Any]], metric: str, selector: str
) -> None:
    """No EPP series for the selection (a pool no flow control knows, a model the gateway never served)
    is "no targets", 503, on both sources: never a made-up 0."""
    for source in ("prometheus", "scrape"):
        status, _ = await _refusal(clients[source], metric, selector)
        assert status == 503, source


GAP = "a target does not report a gauge the metric needs"
GAPS = [
    # the pod exposes no family of this metric at all: it is not one of its targets
    ("vllm_requests_waiting", "model_name=broken", GAP),
    ("vllm_requests_inflight", "model_name=broken", GAP),
    ("vllm_kv_cache_usage", "model_name=broken", GAP),
    ("vllm_requests_waiting", "model_name=busy", GAP),
    ("vllm_requests_inflight", "model_name=busy", GAP),
]


async def _refusal(client: TestClient[Any, Any], metric: str, selector: str) -> tuple[int, str]:
    """The status and message once the source has data.

    The outward message never says "warming up" (errors.py keeps causes out of it), so a source's
    warm-up is told by a question with an answer: a gauge of a healthy model, served once every
    target has been scraped. The refusal is read after that, once.
    """
    await _value(client, "vllm_requests_waiting", "model_name=llama")
    response = await client.get(
        f"/apis/external.metrics.k8s.io/v1beta1/namespaces/prod/{metric}",
        params={"labelSelector": selector},
    )
    body = await response.json()
    return response.status, body.get("message", body)


@pytest.mark.parametrize(("metric", "selector", "reason"), GAPS, ids=[f"{m} {s}" for m, s, _ in GAPS])
async def test_both_sources_refuse_a_broken_gauge_alike(
    clients: dict[str, TestClient[Any, Any]], metric: str, selector: str, reason: str
) -> None:
    """A gauge family absent on a present pod, or NaN, is 503 on both sources with the same
    outward reason: never a number, and never on_empty's 0."""
    from_prometheus = await _refusal(clients["prometheus"], metric, selector)
    from_scrape = await _refusal(clients["scrape"], metric, selector)
    assert from_prometheus == from_scrape
    assert from_scrape == (503, f"unable to fetch external metric {metric!r}: {reason}")
