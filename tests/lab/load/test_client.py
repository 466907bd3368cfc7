"""One streaming completion timed as a client times it, and the server identified before any load."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from lab import virtual_time
from lab.clock import ScaledClock
from lab.emulator.params import EngineParams
from lab.emulator.replica import EmulatedReplica
from lab.load.client import CompletionClient, RequestResult
from lab.load.server import ProfileFailure, identify

PARAMS = EngineParams(
    step_base_seconds=0.02,
    step_per_seq_seconds=0.0,
    step_per_prefill_token_seconds=0.0001,
    step_jitter=0.0,
    frontend_seconds=0.01,
)


def test_a_streamed_completion_has_its_ttft_tpot_and_tokens() -> None:
    """Against an emulated vLLM: TTFT is the front-end plus one prefill step, TPOT one decode step, and
    the usage chunk gives the token count. On virtual time (`lab.virtual_time`), where the CPU the
    client and the server spend costs no time: on the wall clock a loaded 2-core CI run read a TTFT of
    94 ms for these 50 (the check is of the client's timing, not of the machine's)."""
    outcome, refused, seen = virtual_time.run(_two_requests())
    assert outcome.error is None and outcome.output_tokens == 10 and outcome.ttft is not None
    assert outcome.ttft == pytest.approx(0.01 + PARAMS.step_seconds(1, 200), abs=1e-6)
    assert seen == [outcome.ttft]
    assert outcome.tpot == pytest.approx(PARAMS.step_seconds(1, 1), abs=1e-6)
    assert outcome.e2e == pytest.approx(outcome.ttft + 9 * PARAMS.step_seconds(1, 1), abs=1e-6)
    assert refused.error == "HTTP 404: The model `other` does not exist." and refused.ttft is None


async def _two_requests() -> tuple[RequestResult, RequestResult, list[float]]:
    replica = EmulatedReplica(
        model="m", params=PARAMS, clock=ScaledClock(1.0, monotonic=virtual_time.loop_time)
    )
    await replica.start()
    await replica.wait_ready()
    clock = ScaledClock(1.0, monotonic=virtual_time.loop_time)
    seen: list[float] = []
    try:
        async with aiohttp.ClientSession() as session:
            outcome = await CompletionClient(session, replica.url, "m", clock).complete(
                list(range(1000, 1200)), 10, seen.append
            )
            refused = await CompletionClient(session, replica.url, "other", clock).complete([1000, 1001], 4)
    finally:
        await replica.stop()
    return outcome, refused, seen


async def test_a_stream_without_usage_counts_its_chunks() -> None:
    """A server that sends no usage chunk: one chunk per token, as vLLM streams them."""

    async def completions(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for word in (" a", " b", " c"):
            await response.write(
                f"data: {json.dumps({'choices': [{'index': 0, 'text': word}]})}\n\n".encode()
            )
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    async with TestServer(app) as server, aiohttp.ClientSession() as session:
        outcome = await CompletionClient(session, str(server.make_url("")), "m", ScaledClock()).complete(
            [1], 3
        )
    assert outcome.error is None and outcome.output_tokens == 3 and outcome.tpot is not None


async def test_a_stream_that_ends_without_tokens_is_a_failure() -> None:
    async def completions(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    async with TestServer(app) as server, aiohttp.ClientSession() as session:
        outcome = await CompletionClient(session, str(server.make_url("")), "m", ScaledClock()).complete(
            [1], 3
        )
    assert outcome.error == "the stream ended without any token"


async def test_identify_describes_the_server() -> None:
    """Version, KV blocks and block size (cache_config_info), context length (the model card)."""
    replica = EmulatedReplica(model="m", params=PARAMS, clock=ScaledClock(1.0))
    await replica.start()
    await replica.wait_ready()
    try:
        async with aiohttp.ClientSession() as session:
            identity = await identify(session, replica.url + "/", "m", max_num_seqs=12)
    finally:
        await replica.stop()
    server = identity.server
    assert (server.vllm_version, server.model, server.max_num_seqs) == ("0.33.0", "m", 12)
    assert (server.num_gpu_blocks, server.block_size, server.max_model_len) == (2048, 16, 4096)
    assert identity.metrics_model == "m"


async def test_identify_names_the_served_models(aiohttp_server: Any) -> None:
    """A vLLM page and a models list without the asked model: the message lists what is served."""

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(text='vllm:num_requests_running{model_name="a"} 0\n')

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "a"}, {"id": "b"}]})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/models", models)
    server = await aiohttp_server(app)
    async with aiohttp.ClientSession() as session:
        with pytest.raises(
            ProfileFailure, match=r"model 'c' is not served by http://\S+; it serves 'a', 'b'"
        ):
            await identify(session, str(server.make_url("")).rstrip("/"), "c")
