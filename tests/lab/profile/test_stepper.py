"""lab/profile/stepper.py: the model's knee as the search asks for it, first on one seed, then its band.

The engine runs themselves (`twin.model.knees`) are replaced by a recorder that answers a knee per
seed: what is checked here is which seeds the stepper asks for and when, and what it makes of the
answers; the model's own knees are checked in tests/lab/profile/twin/test_model.py.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from typing import Any

import pytest

from lab.emulator.params import EngineParams
from lab.profile import stepper as stepper_module
from lab.profile.schema import Profile
from lab.profile.settings import Run, Settings
from lab.profile.stepper import Stepper
from lab.profile.twin.model import SEEDS, band
from lab.profile.twin.params import TwinError
from tests.lab.profile.builders import ENGINE, SLO, profile_of_engine, step

#: the knee the recorder answers on each seed
KNEES = {0: 0.90, 1: 0.80, 2: 0.86}


class Recorder:
    """`knees` as the stepper calls it: records the seeds of each call (and the profiles `build` made
    for the twin)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, ...]] = []
        self.builds = 0

    def build(self, settings: object, run: object) -> Profile:
        self.builds += 1
        return profile_of_engine(ENGINE)

    def __call__(self, params: EngineParams, *_: Any, seeds: Sequence[int], **__: Any) -> list[float]:
        assert params.max_num_seqs == ENGINE.max_num_seqs, "the twin of the sweep"
        self.calls.append(tuple(seeds))
        return [KNEES[seed] for seed in seeds]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    found = Recorder()
    monkeypatch.setattr(stepper_module, "knees", found)
    monkeypatch.setattr(stepper_module, "build", found.build)
    return found


def _stepper() -> Stepper:
    profile = profile_of_engine(ENGINE)
    run = Run(steps=[step(1.0, kind="concurrency")], saturated_rate=1.36, saturated_interval=(1.3, 1.4))
    settings = Settings(url="http://server", model="m", workload=profile.workload, slo=SLO)
    # The view, clock, budget, driver and reader serve the steps, which these calls never take.
    return Stepper(settings, None, None, None, run, None, None)  # type: ignore[arg-type]


def test_the_estimate_runs_one_seed_once_and_the_model_adds_the_others(recorder: Recorder) -> None:
    """`estimate` is the first seed's knee, computed once however often asked; `model` then runs only
    the other seeds, and its knee is the median of all three, its band theirs widened by the
    saturated throughput's interval."""
    stepper = _stepper()

    async def ask() -> tuple[float | None, float | None, Any]:
        return await stepper.estimate(), await stepper.estimate(), await stepper.model(None)

    first, again, guess = asyncio.run(ask())
    assert first == again == KNEES[SEEDS[0]]
    assert recorder.calls == [SEEDS[:1], tuple(SEEDS[1:])]
    assert recorder.builds == 1, "the twin is fitted once for all the seeds"
    found = [KNEES[seed] for seed in SEEDS]
    assert guess.rate == statistics.median(found)
    assert (guess.low, guess.high) == band(found, 1.36, (1.3, 1.4))
    assert guess.low < min(found) and guess.high > max(found)


def test_the_model_alone_runs_every_seed_once(recorder: Recorder) -> None:
    """Asked for the model without an estimate first, the stepper runs each seed once all the same."""
    guess = asyncio.run(_stepper().model(None))
    assert guess is not None and guess.rate == statistics.median(KNEES.values())
    assert sorted(seed for call in recorder.calls for seed in call) == sorted(SEEDS)


def test_no_twin_no_estimate_and_no_model(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the sweep fits no twin (`TwinError`), there is no model to estimate or consult."""

    def no_twin(profile: object) -> EngineParams:
        raise TwinError("one batch size")

    monkeypatch.setattr(stepper_module, "twin_params", no_twin)
    stepper = _stepper()
    assert asyncio.run(stepper.estimate()) is None
    assert asyncio.run(stepper.model(None)) is None
    assert recorder.calls == []
