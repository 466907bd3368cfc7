"""`vllm-autoscale profile` ending early: one line on stderr, exit 1, and a partial profile saved.

The servers are real: an emulated vLLM in a thread, a plain exposition server, a closed port.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from adapter import cli as main_cli
from lab.emulator.params import EngineParams
from lab.profile import cli
from lab.profile.schema import load
from tests.integration.procs import ExpositionServer, free_port
from tests.lab.profile.servers import emulated

# 40 ms steps: one request of 8 output tokens lasts ~0.4 s (40 ms at the time scale of 10).
SLOW = EngineParams(step_base_seconds=0.04, step_per_seq_seconds=0.001, step_jitter=0.0)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vllm-autoscale profile")
    cli.add_arguments(parser)
    return parser.parse_args(argv)


def _run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, dict[str, object]]:
    code = cli.run(_args("--out", str(tmp_path), "--plain", *argv))
    err = capsys.readouterr().err
    return code, err, json.loads((tmp_path / "profile.json").read_text())


def test_profile_is_registered_as_a_sub_command() -> None:
    module, help_text = main_cli.LAB_COMMANDS["profile"]
    assert module == cli.__name__
    assert cli.__doc__ and cli.__doc__.splitlines()[0] == help_text


def test_an_unreachable_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, err, saved = _run(tmp_path, capsys, "--url", url, "--model", "m")
    assert code == 1
    assert err.startswith(f"vllm-autoscale profile: unable to reach {url}/metrics: ") and err.count("\n") == 1
    assert saved["complete"] is False and saved["knee"] is None and saved["steps"] == []
    assert saved["error"] == err.removeprefix("vllm-autoscale profile: ").strip()
    assert not (tmp_path / "saturation.yaml").exists() and not (tmp_path / "profile.png").exists()


def test_a_server_that_is_not_vllm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pages = ExpositionServer()
    try:
        port = pages.add("exporter", lambda: "# TYPE up gauge\nup 1\n")
        code, err, saved = _run(tmp_path, capsys, "--url", f"http://127.0.0.1:{port}", "--model", "m")
    finally:
        pages.close()
    assert code == 1 and err.count("\n") == 1
    assert (
        "is not a vLLM server: its /metrics has no vllm: series (or vLLM runs with --disable-log-stats)"
        in err
    )
    assert saved["complete"] is False and saved["knee"] is None


def test_a_model_the_server_does_not_serve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with emulated(SLOW, model="llama") as url:
        code, err, saved = _run(tmp_path, capsys, "--url", url, "--model", "mistral")
    assert code == 1 and err.count("\n") == 1
    assert f"model 'mistral' is not served by {url}; it serves 'llama'" in err
    assert saved["complete"] is False


def test_a_workload_longer_than_the_context(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with emulated(SLOW) as url:
        code, err, saved = _run(
            tmp_path,
            capsys,
            "--url",
            url,
            "--model",
            "m",
            "--prompt-tokens",
            "4000",
            "--output-tokens",
            "200",
        )
    assert code == 1
    assert (
        "the workload's longest request (4200 tokens, prompt "
        "plus output) exceeds the server's max_model_len 4096" in err
    )
    assert saved["server"]["max_model_len"] == 4096  # type: ignore[index]


def test_an_slo_that_one_request_alone_misses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each token takes ~41 ms; a 10 ms TPOT objective cannot be met even by one request at a time.
    The partial profile keeps the step that showed it, and the server's description, and no knee."""
    with emulated(SLOW, time_scale=10.0) as url:
        code, err, saved = _run(
            tmp_path,
            capsys,
            "--url",
            url,
            "--model",
            "m",
            "--prompt-tokens",
            "64",
            "--output-tokens",
            "8",
            "--slo-tpot",
            "10ms",
            "--time-scale",
            "10",
        )
    assert code == 1 and err.count("\n") == 1
    # A token takes a 41 ms step (no jitter); on the wall clock a loaded machine only adds to it (one
    # run beside a CPU hog read 67 ms), so the message names 41 ms or more, never less.
    assert "the SLO cannot be met: one request at a time already has TPOT p90 " in err
    assert int(err.split("TPOT p90 ")[1].split("ms")[0]) >= 41
    assert "above --slo-tpot 10ms" in err
    profile = load(tmp_path / "profile.json")
    assert not profile.complete and profile.knee is None and profile.targets == {}
    assert [s.clients for s in profile.steps] == [1]
    assert profile.server.vllm_version == "0.33.0" and profile.server.num_gpu_blocks == SLOW.num_gpu_blocks
    assert (tmp_path / "profile.png").exists() and not (tmp_path / "saturation.yaml").exists()
    assert saved["error"] == profile.error


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--time-scale", "0"], "--time-scale 0.0 must be > 0", id="time scale"),
        pytest.param(["--max-num-seqs", "0"], "--max-num-seqs 0 must be at least 1", id="max_num_seqs"),
        pytest.param(["--prompt-tokens", "0"], "--prompt-tokens 0 must be at least 1", id="prompt tokens"),
    ],
)
def test_bad_flags_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert cli.run(_args("--url", "http://x", "--model", "m", "--out", str(tmp_path), *argv)) == 2
    assert message in capsys.readouterr().err


def test_launch_gives_max_num_seqs(tmp_path: Path) -> None:
    """`--launch "vllm serve ... --max-num-seqs 48"` records 48; an explicit flag wins."""
    settings = cli.settings_from(
        _args(
            "--url", "u", "--model", "m", "--out", str(tmp_path), "--launch", "vllm serve m --max-num-seqs 48"
        )
    )
    assert settings.max_num_seqs == 48 and settings.launch_log == tmp_path / "server.log"
    assert (
        cli.settings_from(
            _args(
                "--url",
                "u",
                "--model",
                "m",
                "--max-num-seqs",
                "8",
                "--launch",
                "vllm serve m --max-num-seqs=48",
            )
        ).max_num_seqs
        == 8
    )
