"""The capacity of an emulated replica, from its parameters (derived in `test_profile_emulators`).

A request of `P` prompt and `O` output tokens holds one of `N` batch slots for `O` engine steps; a
full batch's mean step lasts `T = step_base + step_per_seq * N + step_per_prefill_token * (P - 1) * N / O`
(`EngineParams.step_seconds`), so a saturated replica completes `C = N / (O * T)` requests per
emulated second. The tests that check a measured knee, saturation or boundary against it share this.
"""

from __future__ import annotations

from lab.emulator.params import EngineParams


def capacity(params: EngineParams, prompt: float, output: float) -> float:
    """C = N / (O * T) for requests of `prompt` and `output` tokens (their means, for a mix)."""
    n = params.max_num_seqs
    step = (
        params.step_base_seconds
        + params.step_per_seq_seconds * n
        + params.step_per_prefill_token_seconds * (prompt - 1) * n / output
    )
    return n / (output * step)
