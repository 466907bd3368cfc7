"""`vllm-autoscale emulate`: flags, validation, and serving until stopped (in-process)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from adapter import cli as main_cli
from lab.emulate import cli
from lab.emulator.params import EngineParams
from lab.emulator.pd.fleet import DEFAULT_TRANSFER_SECONDS


def _args(*argv: str) -> argparse.Namespace:
    # The sub-command's own parser: building the whole CLI would import every other plugin too.
    parser = argparse.ArgumentParser(prog="vllm-autoscale emulate")
    cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_emulate_is_registered_as_a_sub_command() -> None:
    """`vllm-autoscale emulate` is served by this module through the CLI's table of lab commands."""
    module, help_text = main_cli.LAB_COMMANDS["emulate"]
    assert module == cli.__name__
    assert cli.__doc__ and cli.__doc__.splitlines()[0] == help_text


def test_emulate_flags_cover_every_engine_parameter() -> None:
    """Every EngineParams field is a flag; unset flags keep the calibrated defaults."""
    args = _args(
        "--replicas",
        "3",
        "--model",
        "llama",
        "--max-num-seqs",
        "8",
        "--no-enable-prefix-caching",
        "--step-jitter",
        "0",
        "--max-num-queued-reqs",
        "100",
    )
    params = cli.params_from(args)
    assert (params.max_num_seqs, params.enable_prefix_caching, params.step_jitter) == (8, False, 0.0)
    assert params.max_num_queued_reqs == 100
    assert params.num_gpu_blocks == EngineParams().num_gpu_blocks
    assert (args.replicas, args.model, args.base_port, args.vllm_version) == (3, "llama", 8000, "0.33")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--block-size", "0"], "block_size 0 must be a positive integer", id="bad engine parameter"
        ),
        pytest.param(["--replicas", "0"], "--replicas 0 must be >= 1", id="no replicas"),
    ],
)
def test_invalid_flags_exit_2_with_the_rule(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Invalid settings are refused before anything starts."""
    assert cli.run(_args(*argv)) == 2
    assert message in capsys.readouterr().err


def test_unknown_version_is_refused_by_the_parser() -> None:
    """--vllm-version offers the namings the emulator knows."""
    with pytest.raises(SystemExit):
        _args("--vllm-version", "0.5")


async def test_serve_runs_replicas_until_stopped() -> None:
    """serve_fleet() starts the replicas, reports each URL once it listens, and stops them when told."""
    lines: list[str] = []
    both_ready = asyncio.Event()
    stop = asyncio.Event()

    def say(line: str) -> None:
        lines.append(line)
        if sum(line.startswith("ready:") for line in lines) == 2:
            both_ready.set()

    args = _args(
        "--replicas", "2", "--base-port", "0", "--model", "m", "--load-delay", "5", "--time-scale", "100"
    )
    task = asyncio.create_task(cli.serve_fleet(args, stop, say))
    try:
        async with asyncio.timeout(10):
            await both_ready.wait()
        urls = [line.split()[1] for line in lines if line.startswith("ready:")]
        assert "emulating vLLM 0.33 serving 'm' on 2 server(s)" in lines
        async with aiohttp.ClientSession() as session:
            for url in urls:
                async with session.get(f"{url}/health") as response:
                    assert response.status == 200
    finally:
        stop.set()
        async with asyncio.timeout(10):
            await task
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectorError):
            await session.get(f"{urls[0]}/health")


def test_a_pair_twin_takes_the_pairs_decode_line_and_hand_over(tmp_path: Path) -> None:
    """A profile file holding both the aggregated profile and the pair's `pd` section (the H200 run's
    files joined) makes the twin of the pair: the decode line (4.40 ms + 0.117 ms x running) and the
    11.6 ms hand-over the pair measured, not the aggregated twin's per-request cost; flags still win;
    without the section, the aggregated twin and the default hand-over."""
    run = Path(__file__).resolve().parents[3] / "runs" / "2026-11-28-pd-1p1d-h200x4"
    aggregated = json.loads((run / "aggregated" / "profile.json").read_text())
    both = tmp_path / "profile.json"
    both.write_text(
        json.dumps({**aggregated, "pd": json.loads((run / "pair" / "profile.json").read_text())["pd"]})
    )
    params, transfer = cli.pair_from(_args("--pd", "1:1", "--profile", str(both)))
    assert params.step_base_seconds == pytest.approx(0.0044, abs=5e-5)
    assert params.step_per_seq_seconds == pytest.approx(0.000117, abs=5e-7)
    assert transfer == pytest.approx(0.0116, abs=5e-5)
    assert params.max_num_seqs == 32 and params.num_gpu_blocks == 4096  # the rest: the aggregated twin's
    given, transfer = cli.pair_from(
        _args(
            "--pd",
            "1:1",
            "--profile",
            str(both),
            "--step-per-seq-seconds",
            "0.0002",
            "--kv-transfer-seconds",
            "0",
        )
    )
    assert (given.step_per_seq_seconds, transfer) == (0.0002, 0.0)
    alone = tmp_path / "aggregated.json"
    alone.write_text(json.dumps(aggregated))
    params, transfer = cli.pair_from(_args("--pd", "1:1", "--profile", str(alone)))
    assert params.step_per_seq_seconds == pytest.approx(5.36e-5, rel=0.01)
    assert transfer == DEFAULT_TRANSFER_SECONDS
