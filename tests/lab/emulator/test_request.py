"""Requests: prompt hashing, the toy tokenizer, output budgets and EOS draws."""

from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest

from lab.emulator.request import block_hashes, draw_stop, output_budget, tokenize


def test_block_hashes_cover_full_blocks_only_and_chain() -> None:
    """One hash per full block; equal prefixes share hashes, and a change alters every later hash."""
    a = block_hashes(list(range(10)), 4)
    b = block_hashes([*range(8), 77, 78], 4)
    c = block_hashes([99, *range(1, 10)], 4)
    assert len(a) == 2
    assert a == b
    assert not set(a) & set(c)


def test_tokenize_is_stable_across_processes() -> None:
    """Text prompts map to the same ids in every process, so prefix caching works across replicas."""
    here = tokenize("the quick brown fox", 32000)
    code = "from lab.emulator.request import tokenize; print(tokenize('the quick brown fox', 32000))"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert str(here) == there.strip()
    assert len(here) == 4
    assert all(0 <= t < 32000 for t in here)


@pytest.mark.parametrize(
    ("prompt_len", "max_tokens", "expected"),
    [
        pytest.param(100, 16, 16, id="max_tokens given"),
        pytest.param(100, None, 3996, id="unset max_tokens fills the context"),
        pytest.param(4095, 1, 1, id="exactly fits"),
    ],
)
def test_output_budget(prompt_len: int, max_tokens: int | None, expected: int) -> None:
    """A request may generate max_tokens, or up to max_model_len when it did not say."""
    assert output_budget(prompt_len, max_tokens, 4096) == expected


@pytest.mark.parametrize(
    ("prompt_len", "max_tokens", "message"),
    [
        pytest.param(0, 16, "prompt length 0 must be at least 1 token", id="empty prompt"),
        pytest.param(10, 0, "max_tokens 0 must be at least 1", id="zero max_tokens"),
        pytest.param(4000, 100, "must fit max_model_len (4096)", id="too long together"),
        pytest.param(4096, None, "must fit max_model_len (4096)", id="prompt fills the context"),
    ],
)
def test_output_budget_refuses_what_vllm_answers_400(
    prompt_len: int, max_tokens: int | None, message: str
) -> None:
    """Requests vLLM rejects with 400 raise ValueError with the rule."""
    with pytest.raises(ValueError, match=re.escape(message)):
        output_budget(prompt_len, max_tokens, 4096)


def test_eos_draw_is_geometric_and_capped_by_the_budget() -> None:
    """Without ignore_eos, lengths follow the EOS probability (mean 1/p) and never pass the budget."""
    rng = random.Random(3)
    draws = [draw_stop(10_000, 0.01, rng) for _ in range(4000)]
    mean = sum(length for length, _ in draws) / len(draws)
    assert 90 < mean < 110
    assert {reason for _, reason in draws} == {"stop"}
    assert draw_stop(5, 0.0, rng) == (5, "length")
    capped = [draw_stop(3, 0.5, rng) for _ in range(200)]
    assert max(length for length, _ in capped) <= 3
    assert {"stop", "length"} >= {reason for _, reason in capped}
