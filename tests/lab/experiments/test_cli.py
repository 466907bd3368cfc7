"""`vllm-autoscale experiment`: registered lazily, a dry run prints the plan, a bad catalog exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from adapter import cli as main_cli
from lab.experiments import cli
from tests.lab.experiments.test_catalog import minimal


def test_experiment_is_registered_as_a_sub_command() -> None:
    module, help_text = main_cli.LAB_COMMANDS["experiment"]
    assert module == cli.__name__
    assert cli.__doc__ and cli.__doc__.splitlines()[0] == help_text


def test_a_dry_run_prints_each_command_and_the_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(minimal(measure={"step": "10s", "settle": "2s", "knee_steps": 3})))
    assert main_cli.main(["experiment", str(path), "--gpus", "0,1", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "seqs-16: vllm serve m --port {port} --max-num-seqs 16" in out
    # 3 seeds x (saturation + 3 knee steps) x (2 s + 10 s + ~1 s of idle wait) = 156 s a variant
    assert "(~2.6 min of steps)" in out and "on 2 engines side by side" in out
    assert not (tmp_path / "experiment-out").exists()


def test_an_invalid_catalog_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(minimal(seeds=[0])))
    assert main_cli.main(["experiment", str(path), "--dry-run"]) == 2
    assert "catalog key 'seeds' value [0] must be a list of at least 3" in capsys.readouterr().err


def test_in_process_runs_only_the_emulator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--in-process` puts emulators on virtual time; a real engine's command cannot run that way,
    and the run is refused before anything starts."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(minimal()))
    assert main_cli.main(["experiment", str(path), "--in-process", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "an in-process engine runs the emulator" in err and "vllm serve m --port" in err
    assert not (tmp_path / "o").exists()
