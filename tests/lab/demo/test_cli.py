"""`vllm-autoscale demo`'s flags and the loop it runs on: virtual time unless `--real-time`."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

from adapter.cli import build_parser
from lab.demo import runner
from lab.demo.cli import settings_from
from lab.demo.settings import DemoSettings
from lab.profile.schema import load
from lab.profile.twin.params import twin_params
from lab.virtual_time import VirtualTimeLoop


def _settings(*flags: str) -> DemoSettings:
    return settings_from(build_parser("demo").parse_args(["demo", *flags]))


def test_virtual_time_is_the_default_and_real_time_a_flag() -> None:
    assert _settings().real_time is False
    assert _settings("--real-time").real_time is True


@pytest.mark.parametrize(("flags", "virtual"), [((), True), (("--real-time",), False)])
def test_play_demo_picks_the_loop(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flags: tuple[str, ...], virtual: bool
) -> None:
    loops: list[bool] = []

    async def run_demo(settings: DemoSettings, stream: Any) -> Any:
        loops.append(isinstance(asyncio.get_running_loop(), VirtualTimeLoop))
        return None

    monkeypatch.setattr(runner, "run_demo", run_demo)
    runner.play_demo(_settings("--out", str(tmp_path), *flags), io.StringIO())
    assert loops == [virtual]


def test_the_engine_profile_makes_the_replicas_the_profiled_servers_twin() -> None:
    """`--engine-profile FILE` runs the twin of a measured server (lab.profile.twin.params); `--profile` still
    names the traffic shape, so the two flags never clash."""
    profile = (
        Path(__file__).resolve().parents[3]
        / "runs/2026-11-26-real-vllm-0.26.0-h200/batch-bound/seed0-profile.json"
    )
    twin = twin_params(load(profile))
    settings = _settings("--engine-profile", str(profile), "--profile", "smoke")
    assert settings.params == twin and settings.params != _settings().params
    assert settings.profile.name == "smoke" and str(profile) in settings.engine


def test_an_engine_profile_that_cannot_make_a_twin_is_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "profile.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="profile"):
        _settings("--engine-profile", str(bad))
