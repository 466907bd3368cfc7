"""`vllm-autoscale rehearse`'s flags: the profile's recommendation by default, one source of load."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from lab.profile.schema import load
from lab.rehearsal.cli import add_arguments, load_from, settings_from
from lab.rehearsal.settings import RehearsalError

PROFILE = Path(__file__).parents[2] / "data" / "rehearsal" / "ci-engine-profile.json"
ENGINE = "emulate --base-port {port}"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--engine", ENGINE, "--profile", str(PROFILE), *argv])


def test_the_hpa_defaults_to_the_profiles_recommended_target_and_slo() -> None:
    profile = load(PROFILE)
    recommended = profile.targets["vllm_requests_inflight"]
    settings = settings_from(parse(), profile, gpus=("0", "1"))
    assert settings.policy.target == recommended.value
    assert settings.policy.target_type == recommended.type
    assert settings.policy.max_replicas == 2  # one per GPU
    assert settings.slo.ttft == profile.slo.ttft_seconds and settings.model == profile.server.model


def test_a_metric_the_profile_gives_no_target_needs_one() -> None:
    profile = load(PROFILE)
    missing = "vllm_requests_running"  # a profile recommends no target for it
    assert missing not in profile.targets
    with pytest.raises(RehearsalError, match="give --target"):
        settings_from(parse("--metric", missing), profile, gpus=())
    assert settings_from(parse("--metric", missing, "--target", "3"), profile, gpus=()).policy.target == 3.0


async def test_exactly_one_source_of_load() -> None:
    with pytest.raises(RehearsalError, match="exactly one"):
        await load_from(parse(), capacity=1.0)
    with pytest.raises(RehearsalError, match="exactly one"):
        await load_from(parse("--day", "smoke", "--trace", "t.csv"), capacity=1.0)
    day = await load_from(parse("--day", "smoke", "--duration", "170"), capacity=2.0)
    assert day.compress == pytest.approx(2.0) and day.duration == pytest.approx(170.0)


@pytest.mark.parametrize(
    ("visible", "given", "expected"),
    [("0,1", (), 2), ("", (), 4), ("0,1,2", ("5",), 1)],
    ids=["the visible GPUs", "no GPU: emulators", "the GPUs given win"],
)
def test_max_replicas_defaults_to_the_gpus_the_process_can_see(
    monkeypatch: pytest.MonkeyPatch, visible: str, given: tuple[str, ...], expected: int
) -> None:
    """A two-GPU host with CUDA_VISIBLE_DEVICES set starts: maxReplicas is not 4 there."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    settings = settings_from(parse(), load(PROFILE), gpus=given)
    assert settings.policy.max_replicas == expected


def test_rehearse_and_experiment_start_without_prometheus_api_client() -> None:
    """The package is the lab's extra for `--prometheus-url` only: a GPU host rehearsing a trace or
    running an experiment need not have it (a fresh interpreter that cannot import it)."""
    import subprocess
    import sys

    blocker = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'prometheus_api_client':\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import lab.rehearsal.cli, lab.experiments.cli\n"
        "from adapter import cli\n"
        "cli.build_parser('rehearse'); cli.build_parser('experiment')\n"
    )
    done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
