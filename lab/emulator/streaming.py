"""Streaming completions as vLLM sends them: server-sent events, in emulated time.

One `text_completion` chunk per output (the last with its `finish_reason`), a `usage` chunk when
`stream_options.include_usage`, then `data: [DONE]`, so a client measures TTFT as it would against
vLLM. The first and the last token leave at their emulated times (the engine may already have
computed a step that ends later); tokens in between are merged into a chunk per
`CHUNK_INTERVAL_SECONDS`, as vLLM merges the outputs a client has not read yet.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from typing import Any, Final

from aiohttp import web

from lab.clock import ScaledClock
from lab.emulator.request import Request, RequestStatus
from lab.emulator.runner import EngineRunner

_WORDS: Final = ("the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at")
#: real seconds between the chunks of a stream's middle tokens: a client that needs every token's
#: time reads the first and the last, which are exact; fewer chunks keep the emulator's CPU for the engine
CHUNK_INTERVAL_SECONDS: Final = 0.02


def words(request: Request) -> list[str]:
    """The request's output words, one per token; streamed and whole answers carry the same text."""
    return random.Random(request.request_id).choices(_WORDS, k=max(request.stop_len, request.num_output))


def usage(results: list[Request]) -> dict[str, Any]:
    """The `usage` object of a completion of `results`."""
    prompt_tokens = sum(r.prompt_len for r in results)
    completion_tokens = sum(r.num_output for r in results)
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


async def until(clock: ScaledClock, emulated: float | None) -> None:
    """Sleep until the clock reaches `emulated`: the engine may have computed a step that ends later."""
    if emulated is not None and emulated > clock.now():
        await asyncio.sleep(clock.real(emulated - clock.now()))


async def stream(
    http_request: web.Request,
    runner: EngineRunner,
    model: str,
    submitted: list[tuple[Request, asyncio.Future[Request]]],
    include_usage: bool,
) -> web.StreamResponse:
    """Answer with server-sent events while the submitted requests generate (one choice index
    each); abort them if the client leaves."""
    head = {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
    }
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})

    async def send(data: dict[str, Any] | str) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        await response.write(f"data: {text}\n\n".encode())

    async def tokens(index: int, request: Request, first: int, last: int, reason: str | None) -> None:
        chosen = words(request)[first:last]
        text = " " + " ".join(chosen) if chosen else ""
        choice = {
            "index": index,
            "text": text,
            "logprobs": None,
            "finish_reason": reason,
            "stop_reason": None,
        }
        await send({**head, "choices": [choice], "usage": None})

    async def one(index: int, request: Request, future: asyncio.Future[Request]) -> None:
        clock, sent = runner.clock, 0
        await runner.first_token(request)
        if request.first_token is not None and not future.done():
            await until(clock, request.first_token)
            runner.catch_up()
            sent = max(1, due(request, clock.now()))
            await tokens(index, request, 0, sent, None)
        while not future.done():
            await asyncio.wait([future], timeout=CHUNK_INTERVAL_SECONDS)
            runner.catch_up()
            ready = due(request, clock.now())
            if ready > sent and not future.done():
                await tokens(index, request, sent, ready, None)
                sent = ready
        await until(clock, request.finished)
        await tokens(index, request, sent, request.num_output, request.finish_reason)

    try:
        await response.prepare(http_request)
        await asyncio.gather(*(one(i, r, f) for i, (r, f) in enumerate(submitted)))
        if include_usage:
            await send({**head, "choices": [], "usage": usage([r for r, _f in submitted])})
        await send("[DONE]")
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client left mid-stream: its requests are aborted below, as vLLM aborts them
    finally:
        for request, _future in submitted:
            if request.status is not RequestStatus.FINISHED:
                runner.abort(request)
    return response


def due(request: Request, now: float) -> int:
    """Output tokens whose emulated time has come: the newest may end a step still in the future."""
    if request.last_token is None:
        return 0
    return request.num_output if request.last_token <= now else request.num_output - 1
