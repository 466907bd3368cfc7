"""The HTTP surface of one emulated vLLM server (`vllm-metrics.md` §5.1).

`/metrics` (vLLM's text exposition), `/health` and `/ping` (200, empty body), `/version`,
`/v1/models`, and `/v1/completions`: answered when the emulated generation ends, or with
`"stream": true` as server-sent events the way vLLM sends them (`lab.emulator.streaming`).
Errors use the OpenAI-style body vLLM sends: `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web
from prometheus_client import CollectorRegistry

from lab.emulator.engine import AdmissionRejected
from lab.emulator.exposition import PageWriter
from lab.emulator.metrics_page import CONTENT_TYPE
from lab.emulator.request import Request, output_budget, tokenize
from lab.emulator.runner import EngineRunner, EngineStopped
from lab.emulator.streaming import stream, until, usage, words

#: vLLM's default `max_tokens` for `/v1/completions` (the OpenAI API's)
DEFAULT_MAX_TOKENS: Final = 16


@dataclass(frozen=True)
class Served:
    """What the routes of one replica serve."""

    model: str
    runner: EngineRunner
    registry: CollectorRegistry
    vllm_version: str
    created: int = field(default_factory=lambda: int(time.time()))
    page: PageWriter = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "page", PageWriter(self.registry))


SERVED: Final = web.AppKey("served", Served)


class _BadRequest(Exception):
    pass


def _error(status: int, kind: str, message: str, param: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return web.json_response(body, status=status)


async def metrics(request: web.Request) -> web.Response:
    served = request.app[SERVED]
    served.runner.catch_up()
    return web.Response(body=served.page.page(), headers={"Content-Type": CONTENT_TYPE})


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


def _text(result: Request) -> str:
    return " " + " ".join(words(result)[: result.num_output])


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


async def completions(request: web.Request) -> web.StreamResponse:
    served = request.app[SERVED]
    try:
        body = await request.json()
        if isinstance(body, dict) and body.get("model") not in (None, served.model):
            return _error(404, "NotFoundError", f"The model `{body['model']}` does not exist.", "model")
        ask = _ask(body, served)
    except (_BadRequest, ValueError) as error:
        return _error(400, "BadRequestError", str(error))
    runner = served.runner
    if ask.stream:
        submitted: list[tuple[Request, asyncio.Future[Request]]] = []
        try:
            for prompt in ask.prompts:
                submitted.append(runner.submit(prompt, ask.max_tokens, ignore_eos=ask.ignore_eos))
        except (AdmissionRejected, EngineStopped) as error:
            for queued, _future in submitted:
                runner.abort(queued)
            return _error(503, "ServiceUnavailableError", str(error))
        return await stream(request, runner, served.model, submitted, ask.include_usage)
    try:
        results = await asyncio.gather(
            *(runner.complete(prompt, ask.max_tokens, ignore_eos=ask.ignore_eos) for prompt in ask.prompts)
        )
    except (AdmissionRejected, EngineStopped) as error:
        return _error(503, "ServiceUnavailableError", str(error))
    await until(runner.clock, max((r.finished or 0.0) for r in results))
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
            "usage": usage(results),
        }
    )


def make_app(served: Served) -> web.Application:
    """The aiohttp application of one emulated server."""
    app = web.Application()
    app[SERVED] = served
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    app.router.add_route("*", "/ping", health)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    return app
