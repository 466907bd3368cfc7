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
