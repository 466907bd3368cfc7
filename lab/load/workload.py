"""The workload shape a profile drives: prompt and output token counts, fixed or from a file of pairs.

Prompts are random token ids, sent as a token-id list so the server sees exactly the asked length
whatever its tokenizer; ids are drawn from a band every real vocabulary has, and are random per
request so no two prompts share a prefix block (a profile measures compute, not the prefix cache).
The seed fixes which lengths are drawn, never the ids: a second profile of the same server with
the same seed would otherwise find every prompt in the prefix cache of the first.
"""

from __future__ import annotations

import random
import re
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Final

# Ordinary word-piece ids in every tokenizer of 32k entries or more (ids below ~100 are special tokens).
_TOKEN_ID_LOW: Final = 1000
_TOKEN_ID_HIGH: Final = 20000
# Random 32-bit words folded into the band: ids need no uniformity finer than 2**32 / 19000 (a bias
# of one in 226,000), and one `randbytes` call draws a prompt ~5x faster than an id at a time,
# which the profile, experiments and rehearsal pay on every request they send.
_WORDS: Final = "I"
_WORD_BYTES: Final = array(_WORDS).itemsize
_PAIR: Final = re.compile(r"^\s*(\d+)\s*[,;\s]\s*(\d+)\s*$")


@dataclass(frozen=True)
class Distribution:
    """Token counts of a workload: a fixed value, or the values (sampled uniformly) of a file of pairs."""

    mean: float
    values: tuple[int, ...] = ()
    """Empty for a fixed count (`mean`); otherwise every observed count."""


@dataclass(frozen=True)
class Workload:
    prompt_tokens: Distribution
    output_tokens: Distribution


def fixed(prompt_tokens: int, output_tokens: int) -> Workload:
    """Every request has `prompt_tokens` in and `output_tokens` out."""
    for name, value in (("--prompt-tokens", prompt_tokens), ("--output-tokens", output_tokens)):
        if value < 1:
            raise ValueError(f"{name} {value!r} must be at least 1")
    return Workload(Distribution(float(prompt_tokens)), Distribution(float(output_tokens)))


def read_pairs(path: Path) -> Workload:
    """A workload from a file of `prompt_tokens,output_tokens` lines (comma, semicolon or blanks
    between; `#` comments, blank lines and one header line are skipped). The two distributions keep
    the file's order, so `values[i]` of each form the i-th pair."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ValueError(f"unable to read workload file {path}: {error.strerror or error}") from error
    pairs: list[tuple[int, int]] = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        match = _PAIR.match(text)
        if match is None:
            if not pairs and not any(c.isdigit() for c in text):
                continue  # a header such as "prompt_tokens,output_tokens"
            raise ValueError(f"workload file {path} line {number} {line!r} must be two token counts")
        prompt, output = int(match.group(1)), int(match.group(2))
        if prompt < 1 or output < 1:
            raise ValueError(f"workload file {path} line {number}: token counts must be at least 1")
        pairs.append((prompt, output))
    if not pairs:
        raise ValueError(f"workload file {path} has no prompt,output pairs")
    prompts, outputs = zip(*pairs, strict=True)
    return Workload(
        Distribution(sum(prompts) / len(prompts), tuple(prompts)),
        Distribution(sum(outputs) / len(outputs), tuple(outputs)),
    )


def longest(workload: Workload) -> int:
    """The most tokens (prompt plus output) one request of the workload holds."""
    prompt, output = workload.prompt_tokens, workload.output_tokens
    if prompt.values:
        return max(p + o for p, o in zip(prompt.values, output.values, strict=True))
    return round(prompt.mean) + round(output.mean)


class Sampler:
    """Draws (prompt token ids, output tokens) for requests of a workload; seeded, so runs repeat."""

    def __init__(self, workload: Workload, seed: int | str = 0) -> None:
        self.workload = workload
        self._rng = random.Random(seed)
        self._ids = random.Random()  # from the system's entropy: new prompts on every run

    def reseed(self, seed: int | str) -> None:
        """Draw the lengths from `seed` on (the prompt ids stay random)."""
        self._rng.seed(seed)

    def draw(self) -> tuple[list[int], int]:
        """One request: random prompt ids of the workload's length, and its output length."""
        prompt, output = self.workload.prompt_tokens, self.workload.output_tokens
        if prompt.values:
            index = self._rng.randrange(len(prompt.values))
            length, tokens = prompt.values[index], output.values[index]
        else:
            length, tokens = round(prompt.mean), round(output.mean)
        return self.prompt(length), tokens

    def prompt(self, length: int) -> list[int]:
        """`length` random token ids."""
        words = array(_WORDS, self._ids.randbytes(length * _WORD_BYTES))
        width = _TOKEN_ID_HIGH - _TOKEN_ID_LOW
        return [_TOKEN_ID_LOW + word % width for word in words]
