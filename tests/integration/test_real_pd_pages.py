"""The adapter on the pages a real 1P1D pair of vLLM 0.26.0 engines served under load (NixlConnector,
H200s, 2026-11-28: runs/2026-11-28-pd-1p1d-h200x4/check/metrics-81?0-load.txt, copied to tests/data/).

A kube-apiserver cannot run here, so the pods are static scrape targets carrying the role label, as in
`bench/pd_exactness.py` on the GPU host; the pages are served over HTTP unchanged. What a 0.26.0 pair
shows: each pool's gauges read from its own pod, a decode engine that exports no
`vllm:num_requests_kv_fetch_by_stage` (vLLM 0.33's gauge), and a backlog with requests held but no
rate yet from pages that never change.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapter.app import started_provider
from adapter.config import load_file
from adapter.errors import AdapterError, ConnectorNotReported
from adapter.provider import CachedProvider
from adapter.vocabulary.selectors import parse
from tests.integration.procs import ExpositionServer
from tests.waiting import eventually

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data"
MODEL = "llama-8b-dummy"
ROLE = "llm-d.ai/role"


@pytest.fixture
async def provider() -> AsyncIterator[CachedProvider]:
    server = ExpositionServer()
    targets = []
    for role in ("prefill", "decode"):
        text = (DATA / f"vllm-0.26.0-nixl-{role}.prom").read_text()
        port = server.add(role, lambda text=text: text)  # type: ignore[misc]
        targets.append({"url": f"http://127.0.0.1:{port}/metrics", "labels": {ROLE: role}})
    config = load_file(
        None,
        {
            "source": "scrape",
            "scrape.interval": 0.5,
            "scrape.timeout": 0.4,
            "scrape.targets": targets,
            "scrape.namespace": "default",
            "metrics": {"vllm_prefill_backlog_seconds": {"prefill_throughput": 43131}},
        },
    )
    try:
        async with started_provider(config) as provider:
            yield provider
    finally:
        server.close()


async def _value(provider: CachedProvider, metric: str, role: str) -> float:
    return (await provider.get(metric, "default", parse(f"model_name={MODEL},{ROLE}={role}"))).value


async def test_each_pool_reads_its_own_engine(provider: CachedProvider) -> None:
    # The pages' own values: decode 30 running, KV 0.5184...; prefill 8 running (holding KV for pickup).
    assert await _value(provider, "vllm_requests_running", "decode") == 30.0
    assert await _value(provider, "vllm_requests_running", "prefill") == 8.0
    assert await _value(provider, "vllm_kv_cache_usage", "decode") == pytest.approx(0.5184371184371184, abs=0)
    # Requests waiting for capacity on the decode pod (3; the deferred one waits for its KV).
    assert await _value(provider, "vllm_requests_waiting", "decode") == 3.0


async def test_a_026_decode_engine_reports_no_kv_fetch_gauge(provider: CachedProvider) -> None:
    with pytest.raises(ConnectorNotReported, match="vllm:num_requests_kv_fetch_by_stage absent on"):
        await _value(provider, "vllm_kv_fetch_requests", "decode")


async def test_a_backlog_without_a_rate_is_an_error_not_a_guess(provider: CachedProvider) -> None:
    """The prefill pod holds 8 requests; a page that never changes finishes none in any window, so the
    prompt size, and with it the backlog, is unknown (after the warm-up's two scrapes)."""

    async def settled() -> str | None:
        try:
            value = await _value(provider, "vllm_prefill_backlog_seconds", "prefill")
        except AdapterError as error:
            return None if "warming up" in str(error) else str(error)
        raise AssertionError(f"a backlog of {value} from pages that finish nothing")

    message = await eventually(settled, 10, "two scrapes of the prefill page")
    assert "requests are queued on the prefill pods but none finished in the last 120s" in message
