"""The bisection's band: [highest that held, lowest that failed), each end measured or the range's."""

from __future__ import annotations

import pytest

from lab.experiments.search import bisect, significant


def threshold(at: float, seen: list[float]):  # type: ignore[no-untyped-def]
    async def probe(value: float) -> bool:
        seen.append(value)
        return value < at

    return probe


async def test_the_band_closes_in_on_the_threshold() -> None:
    seen: list[float] = []
    band = await bisect(threshold(6.3, seen), 0.0, 10.0, 4)
    assert seen == [5.0, 7.5, 6.25, 6.875]
    assert (band.held, band.failed) == (6.25, 6.875)
    assert band.held_measured and band.failed_measured
    assert band.probes == ((5.0, True), (7.5, False), (6.25, True), (6.875, False))


async def test_geometric_integer_steps_for_prompt_lengths() -> None:
    seen: list[float] = []
    band = await bisect(threshold(1500, seen), 256, 4096, 3, geometric=True, integer=True)
    assert seen == [1024.0, 2048.0, 1448.0]
    assert (band.held, band.failed) == (1448.0, 2048.0)


async def test_an_end_never_measured_is_said_so() -> None:
    band = await bisect(threshold(100.0, []), 1.0, 2.0, 3)
    assert band.held == 1.875 and band.failed == 2.0
    assert band.held_measured and not band.failed_measured
    assert band.text("req/s") == "1.88 req/s [1.88, ~2)"


async def test_an_integer_band_one_unit_wide_stops_early() -> None:
    seen: list[float] = []
    band = await bisect(threshold(10.5, seen), 10, 11, 5, integer=True)
    assert seen == [] and (band.held, band.failed) == (10, 11)


async def test_an_empty_range_is_refused() -> None:
    with pytest.raises(ValueError, match="must have 0 <= low < high"):
        await bisect(threshold(1.0, []), 2.0, 2.0, 3)


def test_numbers_are_written_with_three_figures_and_no_exponent() -> None:
    assert [significant(x) for x in (2834.2, 19.27, 0.05129, 1234567.0)] == [
        "2,830",
        "19.3",
        "0.0513",
        "1,230,000",
    ]
