"""The HTTP surface of one emulated server (vllm-metrics.md §5.1), through aiohttp's test client."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from lab.clock import ScaledClock
from lab.emulator.engine import Engine
from lab.emulator.metrics_page import EngineCollector, make_registry
from lab.emulator.params import EngineParams
from lab.emulator.routes import Served, make_app
from lab.emulator.runner import EngineRunner

PARAMS = EngineParams(eos_probability=0.0)


@pytest.fixture
async def client(aiohttp_client: Any) -> TestClient[Any, Any]:
    return await _client(aiohttp_client, PARAMS)


async def _client(aiohttp_client: Any, params: EngineParams) -> TestClient[Any, Any]:
    clock = ScaledClock(200.0)
    engine = Engine(params, start=clock.now())
    runner = EngineRunner(engine, clock)
    runner.start()
    registry = make_registry(EngineCollector(engine, "llama"))
    app = make_app(Served("llama", runner, registry, "0.33"))

    async def stop_runner(_app: Any) -> None:
        await runner.stop()

    app.on_cleanup.append(stop_runner)
    return await aiohttp_client(app)  # type: ignore[no-any-return]


async def test_metrics_is_vllm_text_exposition(client: TestClient[Any, Any]) -> None:
    """/metrics answers the 0.0.4 text format with vLLM's content type, parseable by Prometheus' rules."""
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    names = {f.name for f in text_string_to_metric_families(await response.text())}
    assert "vllm:num_requests_running" in names


@pytest.mark.parametrize(("method", "path"), [("GET", "/health"), ("GET", "/ping"), ("POST", "/ping")])
async def test_health_is_200_with_an_empty_body(client: TestClient[Any, Any], method: str, path: str) -> None:
    """A live server answers /health (and /ping) with 200 and no body."""
    response = await client.request(method, path)
    assert response.status == 200
    assert await response.read() == b""


async def test_version(client: TestClient[Any, Any]) -> None:
    """/version names the emulated release."""
    assert await (await client.get("/version")).json() == {"version": "0.33.0"}


async def test_models_lists_one_card_in_vllm_shape(client: TestClient[Any, Any]) -> None:
    """/v1/models has one model card with vLLM's fields, max_model_len included."""
    body = await (await client.get("/v1/models")).json()
    assert body["object"] == "list"
    (card,) = body["data"]
    assert {k: card[k] for k in ("id", "object", "owned_by", "root", "parent", "max_model_len")} == {
        "id": "llama",
        "object": "model",
        "owned_by": "vllm",
        "root": "llama",
        "parent": None,
        "max_model_len": 4096,
    }
    assert card["permission"][0]["object"] == "model_permission"
    assert card["permission"][0]["id"].startswith("modelperm-")


@pytest.mark.parametrize(
    ("prompt", "prompt_tokens", "choices"),
    [
        pytest.param("the quick brown fox jumps", 5, 1, id="text prompt"),
        pytest.param(list(range(300)), 300, 1, id="token-id prompt"),
        pytest.param(["a b", "c d e"], 5, 2, id="batch of texts"),
        pytest.param([[1, 2, 3], [4, 5]], 5, 2, id="batch of token ids"),
    ],
)
async def test_completions_return_when_generation_ends(
    client: TestClient[Any, Any], prompt: object, prompt_tokens: int, choices: int
) -> None:
    """A completion answers with one choice per prompt, max_tokens tokens each with ignore_eos, and usage."""
    response = await client.post(
        "/v1/completions", json={"model": "llama", "prompt": prompt, "max_tokens": 7, "ignore_eos": True}
    )
    assert response.status == 200
    body = await response.json()
    assert body["object"] == "text_completion" and body["model"] == "llama"
    assert [c["finish_reason"] for c in body["choices"]] == ["length"] * choices
    assert all(len(c["text"].split()) == 7 for c in body["choices"])
    assert body["usage"] == {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 7 * choices,
        "total_tokens": prompt_tokens + 7 * choices,
        "prompt_tokens_details": None,
    }


async def test_completions_default_to_16_tokens(client: TestClient[Any, Any]) -> None:
    """Without max_tokens a completion generates vLLM's default of 16 tokens."""
    body = await (await client.post("/v1/completions", json={"prompt": [1, 2, 3], "ignore_eos": True})).json()
    assert body["usage"]["completion_tokens"] == 16


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        pytest.param(
            {"model": "other", "prompt": "x"}, 404, "The model `other` does not exist.", id="unknown model"
        ),
        pytest.param(
            {"prompt": "x", "stream_options": {"include_usage": True}},
            400,
            "Stream options can only be defined when `stream=True`.",
            id="stream options without streaming",
        ),
        pytest.param({"prompt": "x", "n": 2}, 400, "n must be 1", id="n above one"),
        pytest.param(
            {"prompt": [1] * 4000, "max_tokens": 200}, 400, "must fit max_model_len (4096)", id="too long"
        ),
        pytest.param({"prompt": 42}, 400, "prompt 42 must be a string", id="prompt of the wrong type"),
        pytest.param({"prompt": []}, 400, "prompt [] must be", id="empty prompt"),
        pytest.param(
            {"prompt": "x", "max_tokens": True},
            400,
            "max_tokens True must be an integer",
            id="boolean max_tokens",
        ),
        pytest.param(
            {"prompt": "x", "max_tokens": 0}, 400, "max_tokens 0 must be at least 1", id="zero max_tokens"
        ),
    ],
)
async def test_completion_errors_use_vllms_error_body(
    client: TestClient[Any, Any], body: dict[str, Any], status: int, message: str
) -> None:
    """Bad requests are refused before any work, with the OpenAI-style error object vLLM sends."""
    response = await client.post("/v1/completions", json=body)
    assert response.status == status
    error = (await response.json())["error"]
    assert error["code"] == status and message in error["message"]


async def test_malformed_json_is_400(client: TestClient[Any, Any]) -> None:
    """A body that is not JSON is a 400, not a crash."""
    response = await client.post("/v1/completions", data=b"{not json")
    assert response.status == 400


async def test_full_queue_answers_503(aiohttp_client: Any) -> None:
    """With max_num_queued_reqs reached, vLLM answers 503 and counts the rejection."""
    client = await _client(aiohttp_client, replace(PARAMS, max_num_queued_reqs=0))
    response = await client.post("/v1/completions", json={"prompt": "x"})
    assert response.status == 503
    assert "waiting queue is full" in (await response.json())["error"]["message"]
    text = await (await client.get("/metrics")).text()
    assert 'vllm:admission_rejections_total{model_name="llama",reason="max_num_queued_reqs"} 1.0' in text
