"""Durations on the command line: a number with a unit, positive."""

from __future__ import annotations

import pytest

from lab.units import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("2s", 2.0),
        ("10m", 600.0),
        ("1h", 3600.0),
        ("1.5", 1.5),
        (" 250 ms ", 0.25),
        ("1e3ms", 1.0),
    ],
)
def test_durations_in_every_unit(text: str, seconds: float) -> None:
    """ms, s, m and h; a bare number is seconds."""
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("5x", "must be a number with a unit", id="unknown unit"),
        pytest.param("ms", "must be a number with a unit", id="no number"),
        pytest.param("0s", "must be positive", id="zero"),
    ],
)
def test_bad_durations_name_the_value(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        parse_duration(text)
    assert repr(text) in str(error.value)


@pytest.mark.parametrize(("seconds", "text"), [(0.85, "850ms"), (12.5, "12.5s"), (250.0, "4m10s")])
def test_durations_print_short(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
