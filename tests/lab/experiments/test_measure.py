"""The questions of one seed (`lab.experiments.measure`) when the engine completes nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lab.experiments.measure import Questions, Repeat
from lab.experiments.probe import Measured
from lab.load.server import ProfileFailure
from tests.lab.experiments.test_gates import catalog
from tests.lab.profile.builders import step


class Stalled:
    """A probe whose engine answers and completes nothing: no token counted, no request finished."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []

    async def step(self, kind: str, offered: float, *args: Any, **kwargs: Any) -> Measured:
        self.steps.append((kind, offered))
        nothing = replace(
            step(offered, kind="concurrency"), achieved_rate=0.0, generation_tokens_per_second=None
        )
        return Measured(nothing, 0, 1.0)


async def test_a_seed_that_completes_nothing_at_saturation_fails_with_its_reason_not_the_search() -> None:
    """The knee's range would be [0, 0] (the bisection refused it with a ValueError that lost the
    whole record): the seed fails with why, its saturation step kept, and no rate step is spent."""
    probe = Stalled()
    questions = Questions(catalog(), probe, boundary=False, say=lambda text: None)  # type: ignore[arg-type]
    repeat = Repeat(0)
    with pytest.raises(ProfileFailure, match="completed nothing at saturation"):
        await questions.run(0, repeat)
    assert probe.steps == [("concurrency", 64)]
    assert [what for what, _ in repeat.steps] == ["knee-saturation"]
    assert not repeat.complete and repeat.knee is None
