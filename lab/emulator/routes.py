"""The HTTP surface of one emulated vLLM server (`vllm-metrics.md` §5.1).

`/metrics` (vLLM's text exposition), `/health` and `/ping` (200, empty body), `/version`,
`/v1/models`, and `/v1/completions`: answered when the emulated generation ends, or with
`"stream": true` as server-sent events the way vLLM sends them (one `text_completion` chunk per
output, the last with its `finish_reason`, a `usage` chunk when `stream_options.include_usage`, then
`data: [DONE]`), so a client measures TTFT as it would against vLLM. The first and the last token
leave at their emulated times; tokens in between are merged into a chunk per `CHUNK_INTERVAL_SECONDS`,
as vLLM merges the outputs a client has not read yet.
Errors use the OpenAI-style body vLLM sends: `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from lab.emulator.engine import AdmissionRejected
from lab.emulator.metrics_page import CONTENT_TYPE
from lab.emulator.request import Request, RequestStatus, output_budget, tokenize
from lab.emulator.runner import TICK_SECONDS, EngineRunner, EngineStopped, ScaledClock

#: vLLM's default `max_tokens` for `/v1/completions` (the OpenAI API's)
DEFAULT_MAX_TOKENS: Final = 16
_WORDS: Final = ("the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at")
#: real seconds between the chunks of a stream's middle tokens: a client that needs every token's
#: time reads the first and the last, which are exact; fewer chunks keep the emulator's CPU for the engine
CHUNK_INTERVAL_SECONDS: Final = 0.02


@dataclass(frozen=True)
class Served:
    """What the routes of one replica serve."""

    model: str
    runner: EngineRunner
    registry: CollectorRegistry
    vllm_version: str
    created: int = field(default_factory=lambda: int(time.time()))


SERVED: Final = web.AppKey("served", Served)


class FirstTokenWatch:
    """Wakes streams when their request's first token has been computed.

    One poll of every waiting stream per runner tick, rather than a timer per stream: under overload
    hundreds of streams wait in the queue, and each would otherwise wake every tick.
    """

    def __init__(self) -> None:
        self._waiting: dict[Request, asyncio.Event] = {}
        self._task: asyncio.Task[None] | None = None

    async def wait(self, request: Request) -> None:
        """Return once `request` has its first token or has finished (aborted before one)."""
        if request.first_token is not None or request.status is RequestStatus.FINISHED:
            return
        event = asyncio.Event()
        self._waiting[request] = event
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._poll(), name="emulated-first-tokens")
        try:
            await event.wait()
        finally:
            self._waiting.pop(request, None)

    async def _poll(self) -> None:
        while self._waiting:
            await asyncio.sleep(TICK_SECONDS)
            for request, event in list(self._waiting.items()):
                if request.first_token is not None or request.status is RequestStatus.FINISHED:
                    event.set()

    async def close(self) -> None:
        """Stop polling (the app is shutting down)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


WATCH: Final = web.AppKey("first_token_watch", FirstTokenWatch)


class _BadRequest(Exception):
    pass


def _error(status: int, kind: str, message: str, param: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return web.json_response(body, status=status)


async def metrics(request: web.Request) -> web.Response:
    served = request.app[SERVED]
    return web.Response(body=generate_latest(served.registry), headers={"Content-Type": CONTENT_TYPE})


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def version(request: web.Request) -> web.Response:
    return web.json_response({"version": f"{request.app[SERVED].vllm_version}.0"})


async def models(request: web.Request) -> web.Response:
    served = request.app[SERVED]
    permission = {
        "id": f"modelperm-{uuid.uuid4().hex}",
        "object": "model_permission",
        "created": served.created,
        "allow_create_engine": False,
        "allow_sampling": True,
        "allow_logprobs": True,
        "allow_search_indices": False,
        "allow_view": True,
        "allow_fine_tuning": False,
        "organization": "*",
        "group": None,
        "is_blocking": False,
    }
    card = {
        "id": served.model,
        "object": "model",
        "created": served.created,
        "owned_by": "vllm",
        "root": served.model,
        "parent": None,
        "max_model_len": served.runner.engine.params.max_model_len,
        "permission": [permission],
    }
    return web.json_response({"object": "list", "data": [card]})


def _prompts(prompt: Any, vocab_size: int) -> list[list[int]]:
    """Token ids of each prompt in a request: text, token ids, or a batch of either."""
    if isinstance(prompt, str):
        return [tokenize(prompt, vocab_size)]
    if (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
    ):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        return [p for item in prompt for p in _prompts(item, vocab_size)]
    raise _BadRequest(
        f"prompt {prompt!r} must be a string, a list of token ids, or a non-empty list of either"
    )


def _int_field(body: dict[str, Any], name: str, default: int | None) -> int | None:
    value = body.get(name, default)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise _BadRequest(f"{name} {value!r} must be an integer")
    return value


def _words(request: Request) -> list[str]:
    """The request's output words, one per token; streamed and whole answers carry the same text."""
    return random.Random(request.request_id).choices(_WORDS, k=max(request.stop_len, request.num_output))


def _text(result: Request) -> str:
    return " " + " ".join(_words(result)[: result.num_output])


async def _until(clock: ScaledClock, emulated: float | None) -> None:
    """Sleep until the clock reaches `emulated`: the engine may have computed a step that ends later."""
    if emulated is not None and emulated > clock.now():
        await asyncio.sleep(clock.real(emulated - clock.now()))


@dataclass(frozen=True)
class _Ask:
    """A validated `/v1/completions` body."""

    prompts: list[list[int]]
    max_tokens: int | None
    ignore_eos: bool
    stream: bool
    include_usage: bool


def _ask(body: Any, served: Served) -> _Ask:
    """The request's settings; `_BadRequest` or `ValueError` where vLLM answers 400."""
    params = served.runner.engine.params
    if not isinstance(body, dict):
        raise _BadRequest("request body must be a JSON object")
    stream = bool(body.get("stream", False))
    options = body.get("stream_options")
    if options is not None and not stream:
        raise _BadRequest("Stream options can only be defined when `stream=True`.")
    if options is not None and not isinstance(options, dict):
        raise _BadRequest(f"stream_options {options!r} must be an object")
    if _int_field(body, "n", 1) != 1:
        raise _BadRequest("n must be 1: the emulator generates one sequence per prompt")
    max_tokens = _int_field(body, "max_tokens", DEFAULT_MAX_TOKENS)
    prompts = _prompts(body.get("prompt"), params.vocab_size)
    for prompt in prompts:
        output_budget(len(prompt), max_tokens, params.max_model_len)
    include_usage = bool((options or {}).get("include_usage", False))
    return _Ask(prompts, max_tokens, bool(body.get("ignore_eos", False)), stream, include_usage)


def _usage(results: list[Request]) -> dict[str, Any]:
    prompt_tokens = sum(r.prompt_len for r in results)
    completion_tokens = sum(r.num_output for r in results)
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


async def completions(request: web.Request) -> web.StreamResponse:
    served = request.app[SERVED]
    try:
        body = await request.json()
        if isinstance(body, dict) and body.get("model") not in (None, served.model):
            return _error(404, "NotFoundError", f"The model `{body['model']}` does not exist.", "model")
        ask = _ask(body, served)
    except (_BadRequest, ValueError) as error:
        return _error(400, "BadRequestError", str(error))
    if ask.stream:
        return await _stream(request, served, ask)
    runner = served.runner
    try:
        results = await asyncio.gather(
            *(runner.complete(prompt, ask.max_tokens, ignore_eos=ask.ignore_eos) for prompt in ask.prompts)
        )
    except (AdmissionRejected, EngineStopped) as error:
        return _error(503, "ServiceUnavailableError", str(error))
    await _until(runner.clock, max((r.finished or 0.0) for r in results))
    choices = [
        {
            "index": index,
            "text": _text(result),
            "logprobs": None,
            "finish_reason": result.finish_reason,
            "stop_reason": None,
            "prompt_logprobs": None,
        }
        for index, result in enumerate(results)
    ]
    return web.json_response(
        {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": served.model,
            "choices": choices,
            "usage": _usage(results),
        }
    )


async def _stream(http_request: web.Request, served: Served, ask: _Ask) -> web.StreamResponse:
    """Answer with server-sent events while the requests generate; abort them if the client leaves."""
    runner = served.runner
    submitted: list[tuple[Request, asyncio.Future[Request]]] = []
    try:
        for prompt in ask.prompts:
            submitted.append(runner.submit(prompt, ask.max_tokens, ignore_eos=ask.ignore_eos))
    except (AdmissionRejected, EngineStopped) as error:
        for queued, _future in submitted:
            runner.engine.abort(queued)
        return _error(503, "ServiceUnavailableError", str(error))
    head = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
            "model": served.model}  # fmt: skip
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})

    async def send(data: dict[str, Any] | str) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        await response.write(f"data: {text}\n\n".encode())

    async def tokens(index: int, request: Request, first: int, last: int, reason: str | None) -> None:
        words = _words(request)[first:last]
        text = " " + " ".join(words) if words else ""
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
        await http_request.app[WATCH].wait(request)
        if request.first_token is not None and not future.done():
            await _until(clock, request.first_token)
            sent = max(1, _due(request, clock.now()))
            await tokens(index, request, 0, sent, None)
        while not future.done():
            await asyncio.wait([future], timeout=CHUNK_INTERVAL_SECONDS)
            due = _due(request, clock.now())
            if due > sent and not future.done():
                await tokens(index, request, sent, due, None)
                sent = due
        await _until(clock, request.finished)
        await tokens(index, request, sent, request.num_output, request.finish_reason)

    try:
        await response.prepare(http_request)
        await asyncio.gather(*(one(i, r, f) for i, (r, f) in enumerate(submitted)))
        if ask.include_usage:
            await send({**head, "choices": [], "usage": _usage([r for r, _f in submitted])})
        await send("[DONE]")
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client left mid-stream: its requests are aborted below, as vLLM aborts them
    finally:
        for request, _future in submitted:
            if request.status is not RequestStatus.FINISHED:
                runner.engine.abort(request)
    return response


def _due(request: Request, now: float) -> int:
    """Output tokens whose emulated time has come: the newest may end a step still in the future."""
    if request.last_token is None:
        return 0
    return request.num_output if request.last_token <= now else request.num_output - 1


def make_app(served: Served) -> web.Application:
    """The aiohttp application of one emulated server."""
    app = web.Application()
    app[SERVED] = served
    app[WATCH] = FirstTokenWatch()

    async def close_watch(app: web.Application) -> None:
        await app[WATCH].close()

    app.on_cleanup.append(close_watch)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    app.router.add_route("*", "/ping", health)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    return app
