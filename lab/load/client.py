"""One streaming completion against an OpenAI-compatible server, timed as a real client times it.

TTFT is when the first chunk with text arrives, TPOT the time from the first to the last token over
the tokens between (the server's `usage` counts them), e2e when the stream ends. Times are on the
profile's clock (the server's seconds: real ones times an emulator's time scale).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import aiohttp

from lab.clock import ScaledClock

# A stream may stay silent while the request queues; only a connection idle this long (real seconds) is dead.
_READ_TIMEOUT_SECONDS: Final = 600.0
_ERROR_EXCERPT: Final = 200


@dataclass(frozen=True)
class RequestResult:
    """What one request did, in the server's seconds; `error` is set (and the times may be `None`) when it
    failed."""

    sent: float
    ttft: float | None = None
    tpot: float | None = None
    e2e: float | None = None
    done: float | None = None
    """When the stream ended (clock time)."""
    output_tokens: int = 0
    error: str | None = None


class RequestFailed(Exception):
    """The server refused the request or the connection failed; the message says how."""


class CompletionClient:
    """Sends streaming `/v1/completions` requests for `model` to `url`."""

    def __init__(self, session: aiohttp.ClientSession, url: str, model: str, clock: ScaledClock) -> None:
        self.session = session
        self.endpoint = url.rstrip("/") + "/v1/completions"
        self.model = model
        self.clock = clock
        self.timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=_READ_TIMEOUT_SECONDS)

    async def complete(
        self, prompt: list[int], max_tokens: int, on_first_token: Callable[[float], None] | None = None
    ) -> RequestResult:
        """Stream one completion of exactly `max_tokens` tokens (`ignore_eos`); `on_first_token` gets
        the TTFT as soon as it is known. Never raises for a failed request (its `RequestResult.error` says
        why), only when cancelled."""
        body = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        sent = self.clock.now()
        try:
            return await self._stream(body, sent, on_first_token)
        except RequestFailed as error:
            return RequestResult(sent, done=self.clock.now(), error=str(error))
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            return RequestResult(sent, done=self.clock.now(), error=f"{type(error).__name__}: {error}")

    async def _stream(
        self, body: dict[str, Any], sent: float, on_first_token: Callable[[float], None] | None
    ) -> RequestResult:
        first = last = None
        tokens = chunks_with_text = 0
        async with self.session.post(self.endpoint, json=body, timeout=self.timeout) as response:
            if response.status != 200:
                raise RequestFailed(f"HTTP {response.status}: {_message(await response.text())}")
            async for raw in response.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    raise RequestFailed(f"error in stream: {_message(json.dumps(chunk))}")
                now = self.clock.now()
                if any(choice.get("text") for choice in chunk.get("choices") or ()):
                    if first is None:
                        first = now
                        if on_first_token is not None:
                            on_first_token(now - sent)
                    last = now
                    chunks_with_text += 1
                usage = chunk.get("usage")
                if usage:
                    tokens = int(usage.get("completion_tokens", 0))
        done = self.clock.now()
        if first is None or last is None:
            raise RequestFailed("the stream ended without any token")
        tokens = tokens or chunks_with_text  # a server without usage: one chunk per token, as vLLM sends them
        tpot = (last - first) / (tokens - 1) if tokens > 1 else None
        return RequestResult(sent, first - sent, tpot, done - sent, done, tokens)


def _message(text: str) -> str:
    """The `error.message` of an OpenAI-style error body, else the start of the body."""
    try:
        document = json.loads(text)
        message = (
            document["error"]["message"] if isinstance(document.get("error"), dict) else document["error"]
        )
        return str(message)[:_ERROR_EXCERPT]
    except (ValueError, KeyError, TypeError, AttributeError):
        return text.strip()[:_ERROR_EXCERPT] or "(empty body)"
