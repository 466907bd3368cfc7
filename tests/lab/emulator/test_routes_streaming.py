"""Streaming `/v1/completions` (`"stream": true`): server-sent events as vLLM sends them, in time."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from lab import virtual_time
from lab.clock import ScaledClock
from lab.emulator.engine import Engine
from lab.emulator.metrics_page import EngineCollector, make_registry
from lab.emulator.params import EngineParams
from lab.emulator.routes import Served, make_app
from lab.emulator.runner import EngineRunner
from tests.waiting import until

# Slow steps (a 60 ms prefill of 400 tokens, 20 ms a decode) so that times are far above the loop's jitter.
PARAMS = EngineParams(
    step_base_seconds=0.02, step_per_seq_seconds=0.0, step_per_prefill_token_seconds=0.0001, step_jitter=0.0
)
SCALE = 2.0


async def _client(aiohttp_client: Any, params: EngineParams = PARAMS) -> tuple[TestClient[Any, Any], Engine]:
    clock = ScaledClock(SCALE)
    engine = Engine(params, start=clock.now())
    runner = EngineRunner(engine, clock)
    runner.start()
    app = make_app(Served("llama", runner, make_registry(EngineCollector(engine, "llama")), "0.33"))

    async def stop_runner(_app: Any) -> None:
        await runner.stop()

    app.on_cleanup.append(stop_runner)
    return await aiohttp_client(app), engine


def _events(text: str) -> list[str]:
    """The `data:` payloads of an event stream, in order; every event is one `data:` line and a blank line."""
    blocks = text.split("\n\n")
    assert blocks[-1] == "", "the stream must end with a blank line"
    assert all(block.startswith("data: ") and "\n" not in block for block in blocks[:-1])
    return [block.removeprefix("data: ") for block in blocks[:-1]]


async def test_stream_sends_vllm_chunks_then_usage_then_done(aiohttp_client: Any) -> None:
    """Chunks are `text_completion` objects with one choice each; their texts add up to the whole
    completion, the last choice carries `finish_reason`, `include_usage` adds a usage chunk with no
    choices, and `data: [DONE]` ends the stream."""
    client, _engine = await _client(aiohttp_client)
    body = {
        "model": "llama",
        "prompt": list(range(1, 101)),
        "max_tokens": 12,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    response = await client.post("/v1/completions", json=body)
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    events = _events(await response.text())
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    *choices, usage = chunks
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("cmpl-")
    assert all(c["object"] == "text_completion" and c["model"] == "llama" for c in chunks)
    assert all(len(c["choices"]) == 1 and c["choices"][0]["index"] == 0 for c in choices)
    assert [c["choices"][0]["finish_reason"] for c in choices] == [None] * (len(choices) - 1) + ["length"]
    assert len("".join(c["choices"][0]["text"] for c in choices).split()) == 12
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 12
    assert usage["usage"]["prompt_tokens"] == 100


async def test_without_include_usage_the_stream_has_no_usage_chunk(aiohttp_client: Any) -> None:
    """Usage is only sent when asked for, as in vLLM."""
    client, _engine = await _client(aiohttp_client)
    body = {"prompt": [1, 2, 3], "max_tokens": 3, "ignore_eos": True, "stream": True}
    events = _events(await (await client.post("/v1/completions", json=body)).text())
    assert events[-1] == "[DONE]"
    assert all(json.loads(e)["choices"] for e in events[:-1])


def test_first_chunk_arrives_at_the_time_to_first_token() -> None:
    """The first token is sent when the emulated prefill ends, not with the whole answer: the client's
    TTFT (in emulated seconds) is the engine's, give or take the HTTP round trip, and the last chunk
    comes a full decode later. On virtual time (`lab.virtual_time`): what is under test is when the
    server sends, not how fast a loaded machine runs its loop."""

    async def main() -> tuple[float, list[float], float]:
        loop = asyncio.get_running_loop()
        clock = ScaledClock(SCALE, monotonic=loop.time)
        engine = Engine(PARAMS, start=clock.now())
        runner = EngineRunner(engine, clock)
        runner.start()
        app = make_app(Served("llama", runner, make_registry(EngineCollector(engine, "llama")), "0.33"))
        body = {"prompt": list(range(1, 401)), "max_tokens": 20, "ignore_eos": True, "stream": True}
        arrivals: list[float] = []
        async with TestClient(TestServer(app)) as client:
            started = loop.time()
            async with client.post("/v1/completions", json=body) as response:
                async for line in response.content:
                    if line.startswith(b"data: {"):
                        arrivals.append(loop.time())
        await runner.stop()
        return started, arrivals, engine.stats.time_to_first_token.total

    started, arrivals, engine_ttft = virtual_time.run(main())
    ttft = (arrivals[0] - started) * SCALE
    expected_ttft = PARAMS.frontend_seconds + PARAMS.step_seconds(1, 400)
    assert engine_ttft == pytest.approx(expected_ttft)
    assert expected_ttft - 0.002 <= ttft <= expected_ttft + 0.03
    decode = (arrivals[-1] - arrivals[0]) * SCALE
    assert decode == pytest.approx(19 * PARAMS.step_seconds(1, 1), abs=0.03)


async def test_batch_prompts_stream_one_index_each(aiohttp_client: Any) -> None:
    """A list of prompts streams each under its own choice index, each ending with its finish reason."""
    client, _engine = await _client(aiohttp_client)
    body = {"prompt": [[1, 2], [3, 4, 5]], "max_tokens": 4, "ignore_eos": True, "stream": True}
    events = _events(await (await client.post("/v1/completions", json=body)).text())
    choices = [json.loads(e)["choices"][0] for e in events[:-1]]
    for index in (0, 1):
        mine = [c for c in choices if c["index"] == index]
        assert len("".join(c["text"] for c in mine).split()) == 4
        assert mine[-1]["finish_reason"] == "length"


async def test_a_client_that_leaves_aborts_its_request(aiohttp_client: Any) -> None:
    """Closing the connection mid-stream aborts the generation, which vLLM counts as `abort`."""
    client, engine = await _client(aiohttp_client)
    body = {"prompt": [1, 2, 3], "max_tokens": 2000, "ignore_eos": True, "stream": True}
    response = await client.post("/v1/completions", json=body)
    await response.content.readuntil(b"\n\n")
    response.close()
    await until(lambda: engine.stats.request_success["abort"] == 1, what="the abort")
    assert engine.idle


async def test_a_full_queue_answers_503_before_streaming(aiohttp_client: Any) -> None:
    """Admission is refused with a JSON 503, not an event stream, as vLLM does before it starts one."""
    client, _engine = await _client(aiohttp_client, replace(PARAMS, max_num_queued_reqs=0))
    response = await client.post("/v1/completions", json={"prompt": "x", "stream": True})
    assert response.status == 503
    assert "waiting queue is full" in (await response.json())["error"]["message"]
