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
