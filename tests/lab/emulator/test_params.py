"""EngineParams: validation, the step-time model, and the per-field documentation."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

import pytest

from adapter.config.reference import field_docs
from lab.emulator.params import EngineParams


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"max_num_seqs": 0}, "max_num_seqs 0 must be a positive integer", id="zero slots"),
        pytest.param(
            {"block_size": -16}, "block_size -16 must be a positive integer", id="negative block size"
        ),
        pytest.param(
            {"step_base_seconds": -1.0},
            "step_base_seconds -1.0 must be a finite number >= 0",
            id="negative step time",
        ),
        pytest.param(
            {"frontend_seconds": float("nan")},
            "frontend_seconds nan must be a finite number >= 0",
            id="nan front-end time",
        ),
        pytest.param(
            {"step_base_seconds": 0.0, "step_per_seq_seconds": 0.0}, "a step must take time", id="free steps"
        ),
        pytest.param({"step_jitter": 1.0}, "step_jitter 1.0 must be in [0, 1)", id="jitter of 100 percent"),
        pytest.param({"eos_probability": 1.0}, "eos_probability 1.0 must be in [0, 1)", id="eos certain"),
        pytest.param(
            {"max_num_queued_reqs": -1},
            "max_num_queued_reqs -1 must be >= 0 or None",
            id="negative queue limit",
        ),
        pytest.param(
            {"num_gpu_blocks": 10}, "must be >= max_model_len (4096)", id="kv cache below one full sequence"
        ),
        pytest.param(
            {"max_num_batched_tokens": 8},
            "max_num_batched_tokens 8 must be >= max_num_seqs (32)",
            id="budget below slots",
        ),
    ],
)
def test_invalid_params_are_refused_with_the_rule(changes: dict[str, Any], message: str) -> None:
    """Impossible engines are refused at construction, naming the field, the value and the rule."""
    with pytest.raises(ValueError, match=re.escape(message)):
        EngineParams(**changes)


def test_defaults_are_valid_and_mirror_the_recorded_run() -> None:
    """The defaults are the flags of the recorded vLLM 0.26 run (data/vllm-0.26.0/README.md)."""
    params = EngineParams()
    assert (params.max_num_seqs, params.max_model_len, params.num_gpu_blocks, params.block_size) == (
        32,
        4096,
        2048,
        16,
    )
    assert params.max_num_batched_tokens == 8192


@pytest.mark.parametrize(
    ("seqs", "tokens", "expected"),
    [
        pytest.param(1, 1, 0.00152 + 0.000047, id="one decode"),
        pytest.param(27, 27, 0.00152 + 27 * 0.000047, id="27 decodes cost more per step"),
        pytest.param(1, 1001, 0.00152 + 0.000047 + 1000 * 0.000005, id="a 1000-token prefill chunk"),
    ],
)
def test_step_time_grows_with_batch_and_prefill_tokens(seqs: int, tokens: int, expected: float) -> None:
    """A step costs a base, plus per scheduled request, plus per prefill token beyond one per request."""
    assert EngineParams().step_seconds(seqs, tokens) == pytest.approx(expected)


def test_every_field_has_a_docstring_for_help() -> None:
    """Each parameter is documented where it is declared, and `--help` reads that text."""
    docs = field_docs(EngineParams)
    for field in fields(EngineParams):
        assert field.name in docs, f"{field.name} has no docstring"
        assert len(docs[field.name]) > 20
