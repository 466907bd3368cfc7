"""The twin: engine parameters recovered from a profile's curves, and `emulate --profile`."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest

from lab.emulate import cli as emulate
from lab.emulator.params import EngineParams
from lab.profile.schema import Profile, dump
from lab.profile.twin import params as twin_module
from lab.profile.twin.params import TwinError, simulated_tpot, twin_params
from lab.stats import linear_fit
from tests.lab.profile.builders import ENGINE, profile_of_engine, step


def test_the_twin_recovers_the_engine() -> None:
    """Step costs, front-end time, KV cache and context length come back from the curves."""
    twin = twin_params(profile_of_engine(ENGINE))
    assert twin.step_base_seconds == pytest.approx(0.012)
    assert twin.step_per_seq_seconds == pytest.approx(0.002)
    assert twin.step_per_prefill_token_seconds == pytest.approx(0.0001)
    assert twin.frontend_seconds == pytest.approx(0.02)
    assert (twin.num_gpu_blocks, twin.block_size, twin.max_model_len) == (900, 32, 2048)
    assert twin.max_num_seqs == 8, "without max_num_seqs, the most requests the server ran at once"


def test_a_known_max_num_seqs_wins() -> None:
    assert twin_params(profile_of_engine(ENGINE, max_num_seqs=64)).max_num_seqs == 64


def test_a_profile_with_one_batch_size_cannot_make_a_twin() -> None:
    with pytest.raises(TwinError, match="fewer than two batch sizes"):
        twin_params(replace(profile_of_engine(ENGINE), tpot_vs_batch=((1.0, 0.01),)))


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    emulate.add_arguments(parser)
    return parser.parse_args(argv)


def test_emulate_profile_serves_the_twin_and_flags_still_win(tmp_path: Path) -> None:
    """`emulate --profile FILE` takes the twin's parameters and the profiled model name; an engine
    flag given beside it wins, and --model too."""
    path = tmp_path / "profile.json"
    dump(profile_of_engine(ENGINE), path)
    args = _args("--profile", str(path), "--step-jitter", "0")
    params = emulate.params_from(args)
    assert params.step_per_seq_seconds == pytest.approx(0.002) and params.step_jitter == 0.0
    assert emulate.model_from(args) == "llama"
    assert emulate.model_from(_args("--profile", str(path), "--model", "other")) == "other"
    assert emulate.model_from(_args()) == "emulated-model"


def test_emulate_refuses_an_unusable_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "profile.json"
    path.write_text('{"schema_version": 99}')
    assert emulate.run(_args("--profile", str(path))) == 2
    assert "schema_version 99" in capsys.readouterr().err


def _open_loop_profile(points: tuple[tuple[float, float], ...], prefill: float) -> Profile:
    """A profile whose open-loop steps ran `points` (rate, TPOT), a running count of half the rate each."""
    closed = (
        step(1.0, kind="concurrency", running=1.0, tpot=0.0017 + 0.00003, server_ttft_mean=0.017),
        step(8.0, kind="concurrency", running=8.0, tpot=0.0017 + 0.00003 * 8),
        step(32.0, kind="concurrency", running=31.0, tpot=0.0017 + 0.00003 * 31),
    )
    opened = tuple(step(r, running=r / 2.0, tpot=t) for r, t in points)
    return replace(
        profile_of_engine(ENGINE),
        steps=closed + opened,
        tpot_vs_batch=((1.0, 0.0017 + 0.00003), (8.0, 0.0017 + 0.00003 * 8), (31.0, 0.0017 + 0.00003 * 31)),
        prefill_seconds_per_token=prefill,
    )


def _as_served(rates: tuple[float, ...], factor: float, prefill: float) -> Profile:
    """A profile whose open-loop steps at `rates` decoded as the twin of its closed-loop line does
    with that line scaled by `factor` (running counts: half the rate)."""
    profile = _open_loop_profile((), prefill)
    slower = _engine_of(profile, factor)
    points = tuple((rate, simulated_tpot(slower, rate, 128, 32) or 0.0) for rate in rates)
    return _open_loop_profile(points, prefill)


def _engine_of(profile: Profile, ratio: float = 1.0) -> EngineParams:
    fit = linear_fit(profile.tpot_vs_batch)
    assert fit is not None
    return twin_module._engine(profile, EngineParams(), fit, ratio)


def test_the_twin_decodes_as_the_busy_open_loop_steps_did() -> None:
    """Open-loop steps as a server decodes them whose open loop runs 1.4 times its closed-loop line
    (a real vLLM decodes a lockstep closed-loop batch faster than open arrivals): the twin finds the
    1.4, though at each rate the slower engine also runs more requests than the line's twin does."""
    prefill = 0.00001
    twin = twin_params(_as_served((40.0, 60.0, 80.0, 100.0), 1.4, prefill))
    carried = prefill * (128.0 - 1) / 32.0
    assert twin.step_base_seconds == pytest.approx(1.4 * 0.0017, rel=0.02)
    assert twin.step_per_seq_seconds + carried == pytest.approx(1.4 * 0.00003, rel=0.02)


def test_an_open_loop_as_the_twin_decodes_it_leaves_the_line() -> None:
    """An emulator's own open-loop steps read what its twin reads (within the noise of a step): a
    ratio whose interval holds 1 leaves the closed-loop line as it is, whatever an open loop adds
    over the line."""
    noisy = _as_served((40.0, 60.0, 80.0, 100.0), 1.0, 0.0)
    jittered = tuple(
        replace(s, tpot_seconds={**s.tpot_seconds, "mean": s.tpot_seconds["mean"] * f})
        if s.kind == "rate"
        else s
        for s, f in zip(noisy.steps, (1, 1, 1, 1.02, 0.98, 1.01, 0.99), strict=True)
    )
    twin = twin_params(replace(noisy, steps=jittered))
    assert twin.step_base_seconds == pytest.approx(0.0017, rel=0.02)


def test_few_busy_open_loop_steps_leave_the_closed_loop_line() -> None:
    twin = twin_params(_open_loop_profile(((24.0, 0.0034), (40.0, 0.0040)), 0.0))
    assert twin.step_base_seconds == pytest.approx(0.0017, rel=0.02)
    assert twin.step_per_seq_seconds == pytest.approx(0.00003, rel=0.02)


def test_the_ratio_is_found_where_the_slower_twin_runs_more_requests() -> None:
    """On an engine whose TPOT rises steeply with the batch (`ENGINE`: 2.4 ms more a request), a twin
    decoding slower also runs more requests at a rate, which slows it again: one ratio of TPOTs
    overshoots, and the twin applies the ratio and measures again until it settles on the server's."""
    base = profile_of_engine(ENGINE)
    slower = _engine_of(base, 1.3)
    opened = tuple(
        step(rate, running=rate, tpot=simulated_tpot(slower, rate, 128, 32) or 0.0)
        for rate in (3.0, 4.0, 5.0, 6.0)
    )
    twin = twin_params(replace(base, steps=base.steps + opened))
    assert twin.step_base_seconds == pytest.approx(1.3 * ENGINE.step_base_seconds, rel=0.03)
