"""What the profiled server is: reachable, vLLM, serving the model; its version and KV cache.

Each way it can fail is a `ProfileFailure` with a one-line message that names the URL and the cause.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import aiohttp

from lab.load.metrics_reader import PageReader, is_vllm

_TIMEOUT: Final = aiohttp.ClientTimeout(total=30)


@dataclass(frozen=True)
class Server:
    """What the server says about itself (its `/metrics` and `/v1/models`)."""

    vllm_version: str
    model: str
    max_num_seqs: int | None
    """From `vllm:cache_config_info` / the engine's scheduler config when exported, else `None`."""
    num_gpu_blocks: int | None
    block_size: int | None
    max_model_len: int | None = None
    """The longest prompt plus output the server takes (its `/v1/models` card)."""


class ProfileFailure(Exception):
    """Why a profile stopped before it found the knee, in one line (its partial profile is saved)."""


@dataclass(frozen=True)
class Identity:
    """The server as the profile sees it."""

    server: Server
    metrics_model: str
    """The `model_name` of its series: the first `--served-model-name`, which may differ from the one
    asked."""


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    try:
        async with session.get(url, timeout=_TIMEOUT) as response:
            return response.status, await response.text()
    except (aiohttp.ClientError, TimeoutError) as error:
        cause = str(error) or type(error).__name__
        raise ProfileFailure(f"unable to reach {url}: {cause}") from error


async def identify(
    session: aiohttp.ClientSession, url: str, model: str, max_num_seqs: int | None = None
) -> Identity:
    """Check the server and describe it; `ProfileFailure` when it is unreachable, is not vLLM, or
    does not serve `model`."""
    base = url.rstrip("/")
    status, page = await _get(session, f"{base}/metrics")
    if status != 200 or not is_vllm(page):
        found = "has no vllm: series" if status == 200 else f"answered HTTP {status}"
        raise ProfileFailure(
            f"{base} is not a vLLM server: its /metrics {found} (or vLLM runs with --disable-log-stats)"
        )
    status, text = await _get(session, f"{base}/v1/models")
    cards = _cards(text) if status == 200 else []
    names = [str(card.get("id")) for card in cards]
    if model not in names:
        served = ", ".join(repr(n) for n in names) or "nothing"
        raise ProfileFailure(f"model {model!r} is not served by {base}; it serves {served}")
    card = cards[names.index(model)]
    reader = PageReader(model)
    page_models = reader.models(page)
    metrics_model = model if model in page_models or len(page_models) != 1 else next(iter(page_models))
    cache = reader.cache_config(page)
    status, text = await _get(session, f"{base}/version")
    version = _field(text, "version") if status == 200 else None
    max_model_len = card.get("max_model_len")
    server = Server(
        vllm_version=str(version or "unknown"),
        model=model,
        max_num_seqs=max_num_seqs,
        num_gpu_blocks=cache.num_gpu_blocks,
        block_size=cache.block_size,
        max_model_len=max_model_len if isinstance(max_model_len, int) else None,
    )
    return Identity(server, metrics_model)


def _cards(text: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(text).get("data")
    except (ValueError, AttributeError):
        return []
    return [card for card in data if isinstance(card, dict)] if isinstance(data, list) else []


def _field(text: str, name: str) -> Any:
    try:
        return json.loads(text).get(name)
    except (ValueError, AttributeError):
        return None
