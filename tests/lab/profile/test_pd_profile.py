"""`profile --pd` against an emulated 1:1 pair (`emulate --pd 1:1`) in this process, on virtual time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import virtual_time
from lab.backtest.pools.cli import pair_model
from lab.emulator.params import EngineParams
from lab.emulator.pd.fleet import DisaggregatedFleet
from lab.load.workload import fixed
from lab.profile.pd import schema as pd_schema
from lab.profile.pd.cli import measure
from lab.profile.pd.measure import PdSettings
from lab.profile.pd.recommend import ratio, summary
from lab.profile.schema import PercentileSlo, ProfileError

TRANSFER = 0.05
#: prefill at 50 µs per prompt token in a 2,048-token step (~20k tokens/s): a few clients saturate it
PARAMS = EngineParams(
    max_num_seqs=16, step_jitter=0.0, step_per_prefill_token_seconds=0.00005, max_num_batched_tokens=2048
)


def profile_pair(tmp_path: Path) -> pd_schema.PdProfile:
    """The pair's profile, measured as `profile --pd --url DECODE --prefill-url PREFILL` does."""

    async def main() -> pd_schema.PdProfile:
        # The emulator's clock on the loop's (virtual) time, as `emulated()` does for one replica.
        fleet = DisaggregatedFleet(
            model="m", params=PARAMS, transfer_seconds=TRANSFER, seed=1, monotonic=virtual_time.loop_time
        )
        async with fleet:
            await fleet.start(1, 1)
            await fleet.wait_ready()
            prefill, decode = fleet.replicas["prefill"][0].url, fleet.replicas["decode"][0].url
            settings = PdSettings(
                url=decode,
                prefill_url=prefill,
                decode_url=decode,
                model="m",
                workload=fixed(256, 128),
                slo=PercentileSlo(0.5, 0.0025),
                window=6.0,
                budget=300.0,
            )
            return await measure(settings)

    return virtual_time.run(main())


def test_a_pd_pair_profile_measures_the_path_and_recommends_per_role(tmp_path: Path) -> None:
    """The hand-over is the emulator's transfer (plus at most a step's rounding); the prefill
    throughput is measured with the prefill queue standing; the decode knee is set by the TPOT
    objective; the section is standard JSON the backtest takes as a pair model."""
    pd = profile_pair(tmp_path)
    print(summary(pd))
    assert pd.handover_seconds == pytest.approx(TRANSFER, abs=0.01)
    # A saturated prefill step holds 2,048 prompt tokens: 2048 / (1.52 ms + 16 x 47 µs + 2048 x 50 µs).
    full_step = PARAMS.step_base_seconds + 16 * PARAMS.step_per_seq_seconds + 2048 * 0.00005
    assert pd.prefill.saturated
    assert pd.prefill.throughput_tokens_per_second == pytest.approx(2048 / full_step, rel=0.03)
    assert pd.decode.knee_bound in {"tpot", "slots"} and 0 < pd.decode.knee_running <= PARAMS.max_num_seqs
    assert pd.decode.knee_tpot_seconds <= 0.0025 + 1e-9
    assert pd.prefill_targets["vllm_prefill_backlog_seconds"].value == pytest.approx(
        (0.5 - pd.unloaded_ttft_seconds) / 2, abs=1e-3
    )
    assert pd.decode_targets["vllm_requests_running"].value == pytest.approx(
        pd.decode.knee_running / 1.1, abs=0.05
    )
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"schema_version": 1, "knee": None}))  # an aggregated profile's keys stay
    pd_schema.write(pd, path)
    text = path.read_text()
    document = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert "knee" in document and pd_schema.load(path) == pd
    assert pair_model(pd).prefill_throughput == pytest.approx(pd.prefill.throughput_tokens_per_second)


@pytest.mark.parametrize(
    ("x", "expected"), [(1.0, (1, 1)), (0.48, (1, 2)), (2.9, (3, 1)), (0.32, (1, 3)), (0.7, (2, 3))]
)
def test_the_ratio_is_the_smallest_whole_pair_within_ten_percent(x: float, expected: tuple[int, int]) -> None:
    assert ratio(x) == expected


def test_a_file_without_a_pd_section_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    path.write_text('{"schema_version": 1}')
    with pytest.raises(ProfileError, match="no 'pd' section"):
        pd_schema.load(path)


def test_every_pd_command_in_the_docs_parses() -> None:
    """docs/profile.md's `profile --pd` commands (the emulated pair's and the GPU host's) parse."""
    import argparse
    import shlex

    from lab.profile import cli

    page = (Path(__file__).parents[3] / "docs" / "profile.md").read_text(encoding="utf-8")
    lines = [
        line
        for line in page.replace("\\\n", " ").splitlines()
        if line.startswith("vllm-autoscale profile --pd")
    ]
    assert len(lines) == 2
    for line in lines:
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)
        args = parser.parse_args(shlex.split(line)[2:])
        assert args.pd and args.prefill_url
