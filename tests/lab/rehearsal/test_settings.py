"""The rehearsal's settings: an engine command that says where to listen, at the rehearsal's pace."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.backtest.policy import Policy
from lab.engine.process import declared_time_scale
from lab.rehearsal.settings import RehearsalError, RehearsalSettings

POLICY = Policy("p", target=4.0, min_replicas=1, max_replicas=3)


def settings(engine: str = "serve --port {port}", **extra: object) -> RehearsalSettings:
    return RehearsalSettings(engine=engine, model="m", policy=POLICY, out=Path("out"), **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("template", "scale"),
    [
        pytest.param("emulate --base-port {port} --time-scale 10", 10.0, id="separate value"),
        pytest.param("emulate --time-scale=2.5 --base-port {port}", 2.5, id="equals sign"),
        pytest.param("vllm serve m --port {port}", None, id="a real engine declares none"),
    ],
)
def test_the_engines_time_scale_is_read_off_its_command(template: str, scale: float | None) -> None:
    assert declared_time_scale(template) == scale


def test_an_engine_command_without_a_port_is_refused() -> None:
    with pytest.raises(RehearsalError, match=r"has no {port}: it must say where to listen"):
        settings("vllm serve m")


def test_an_emulator_at_another_pace_than_the_rehearsal_is_refused() -> None:
    """Emulated seconds on one side and wall seconds on the other would make every timing wrong."""
    with pytest.raises(RehearsalError, match="--time-scale 10 but the rehearsal at 1"):
        settings("emulate --base-port {port} --time-scale 10")
    assert settings("emulate --base-port {port} --time-scale 10", time_scale=10.0).wall(15.0) == 1.5


@pytest.mark.parametrize("start", [0, 4])
def test_the_first_replicas_lie_within_the_hpas_bounds(start: int) -> None:
    with pytest.raises(RehearsalError, match=f"start replicas {start}"):
        settings(start_replicas=start)


def test_the_metric_is_one_scrape_late_and_refreshed_every_scrape() -> None:
    pipeline = settings(scrape_interval=2.0).pipeline
    assert (pipeline.interval, pipeline.lag) == (2.0, 2.0)
