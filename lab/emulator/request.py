"""One emulated request: what was asked, where it is in the engine, and the times vLLM measures."""

from __future__ import annotations

import enum
import math
import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


class RequestStatus(enum.Enum):
    """Where a request is: in the front-end, queued in the engine, in the batch, or done."""

    FRONTEND = "frontend"
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False, slots=True)
class Request:
    """A request and its progress; times are emulated seconds on the engine's clock.

    `num_computed` counts tokens whose KV is in the cache; a request decodes when it is one behind
    `num_tokens` (the last sampled token is fed in the next step), exactly as vLLM's V1 scheduler.
    """

    request_id: str
    prompt_len: int
    max_tokens: int
    """Output tokens allowed: the request's `max_tokens`, or what is left of `max_model_len`."""
    max_tokens_param: int | None
    """`max_tokens` as the client sent it (`None` when unset): feeds `request_params_max_tokens`."""
    stop_len: int
    """Output tokens after which the request finishes (EOS drawn at submission, or `max_tokens`)."""
    stop_reason: str
    """`stop` when an EOS ends it, `length` when `max_tokens` or `max_model_len` does."""
    block_hashes: list[int]
    """Chained hashes of the full blocks computed so far: the prompt's (equal prefixes share them), then
    those that generated tokens filled (`extend_hashes`), as vLLM V1 hashes every full block of a
    request, so that a preempted request finds its own blocks again if nothing evicted them."""
    arrival: float
    """When the front-end received it (TTFT and e2e start here)."""
    enqueued: float
    """When it reached the engine's waiting queue (queue time starts here)."""
    key: int = 0
    """Unique within its engine: names the blocks no other request can share (its generated tokens,
    a prompt given only as a length)."""
    on_finish: Callable[[Request], None] | None = None
    status: RequestStatus = RequestStatus.FRONTEND
    num_output: int = 0
    num_computed: int = 0
    blocks: list[int] = field(default_factory=list)
    num_cached_blocks: int = 0
    """How many leading blocks are registered in the prefix cache."""
    num_cached_prompt_tokens: int = 0
    """Prompt tokens served by the prefix cache at the first scheduling."""
    num_preemptions: int = 0
    first_scheduled: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    finished: float | None = None
    finish_reason: str | None = None

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens."""
        return self.prompt_len + self.num_output

    @property
    def ttft(self) -> float | None:
        """Time to first token, from front-end arrival."""
        return None if self.first_token is None else self.first_token - self.arrival

    @property
    def e2e(self) -> float | None:
        """End-to-end latency, from front-end arrival to the last token."""
        return None if self.finished is None else self.finished - self.arrival


def block_hashes(token_ids: Sequence[int], block_size: int) -> list[int]:
    """Chained hashes of the full blocks of `token_ids`, as vLLM's prefix cache keys them.

    Each hash covers its block and every block before it, so two prompts share a hash only while
    their whole prefix is equal. Python's hash of an int tuple is not randomized per process.
    """
    hashes: list[int] = []
    parent = 0
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start : start + block_size])))
        hashes.append(parent)
    return hashes


def unique_hashes(key: int, num_blocks: int) -> list[int]:
    """Chained hashes of a prompt of `num_blocks` full blocks of tokens no other prompt has (one
    given as a length): nothing else hits them, yet the request itself can, after a preemption."""
    hashes: list[int] = []
    extend_hashes(hashes, key, num_blocks, marker=-1)
    return hashes


def extend_hashes(hashes: list[int], key: int, num_blocks: int, *, marker: int = -2) -> None:
    """Chain hashes onto `hashes` up to `num_blocks` blocks for tokens unique to request `key`.

    The emulator's generated tokens are random, so a block that holds any of them is the request's
    own: its hash chains on the prefix before it and names the request (the negative `marker` keeps
    these apart from hashes of token blocks, which are tuples of ids)."""
    parent = hashes[-1] if hashes else 0
    for index in range(len(hashes), num_blocks):
        parent = hash((parent, marker, key, index))
        hashes.append(parent)


def tokenize(text: str, vocab_size: int) -> list[int]:
    """Token ids for a text prompt: one per whitespace-separated word, stable across processes.

    Not a real tokenizer; equal texts get equal ids, so prefix caching works for text prompts too.
    """
    return [zlib.crc32(word.encode()) % vocab_size for word in text.split()]


def output_budget(prompt_len: int, max_tokens: int | None, max_model_len: int) -> int:
    """Output tokens a request may generate; `ValueError` where vLLM answers 400."""
    if prompt_len < 1:
        raise ValueError(f"prompt length {prompt_len!r} must be at least 1 token")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens {max_tokens!r} must be at least 1")
    allowed = max_model_len - prompt_len
    if allowed < 1 or (max_tokens is not None and max_tokens > allowed):
        raise ValueError(
            f"prompt ({prompt_len} tokens) plus max_tokens ({max_tokens}) must fit max_model_len "
            f"({max_model_len})"
        )
    return allowed if max_tokens is None else max_tokens


def draw_stop(budget: int, eos_probability: float, rng: random.Random) -> tuple[int, str]:
    """Output length and finish reason: EOS after a geometric number of tokens, else the budget."""
    if eos_probability > 0:
        eos_at = 1 + int(math.log(1.0 - rng.random()) / math.log(1.0 - eos_probability))
        if eos_at <= budget:
            return eos_at, "stop"
    return budget, "length"
