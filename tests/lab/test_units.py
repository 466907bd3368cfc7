"""Durations on the command line: a number with a unit, positive."""

from __future__ import annotations

import argparse

import pytest

from adapter.config import parse_duration as config_duration
from adapter.errors import ConfigError
from lab.units import duration, duration_or_zero, format_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("2s", 2.0),
        ("10m", 600.0),
        ("1h", 3600.0),
        ("1.5", 1.5),
        (" 250ms ", 0.25),
    ],
)
def test_durations_in_every_unit(text: str, seconds: float) -> None:
    """ms, s, m and h; a bare number is seconds."""
    assert duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("5x", "must be a number with a unit", id="unknown unit"),
        pytest.param("ms", "must be a number with a unit", id="no number"),
        pytest.param("0s", "must be positive", id="zero"),
        pytest.param(
            "1e3ms", "must be a number with a unit", id="an exponent, which configuration refuses too"
        ),
        pytest.param(
            "250 ms", "must be a number with a unit", id="a space inside, which configuration refuses too"
        ),
    ],
)
def test_bad_durations_name_the_value(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message) as error:
        duration(text)
    assert repr(text) in str(error.value)


@pytest.mark.parametrize("text", ["500ms", "2s", "10m", "1.5h", "1e3s", "-1s", ".5s", "250 ms", "2d"])
def test_one_grammar_with_the_configuration(text: str) -> None:
    """A duration with a unit is read alike on the command line and in the adapter's configuration."""
    try:
        in_config: float | None = config_duration(text, "k")
    except ConfigError:
        in_config = None
    try:
        on_command_line: float | None = duration(text)
    except argparse.ArgumentTypeError:
        on_command_line = None
    assert on_command_line == in_config


@pytest.mark.parametrize(("seconds", "text"), [(0.85, "850ms"), (12.5, "12.5s"), (250.0, "4m10s")])
def test_durations_print_short(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0.0), ("0s", 0.0), ("0ms", 0.0), ("90", 90.0), ("2m", 120.0)]
)
def test_zero_is_a_duration_where_it_means_none(text: str, seconds: float) -> None:
    """`--cold-start 0`, `--grace 0`: no cold start, no grace; otherwise the same grammar."""
    assert duration_or_zero(text) == seconds


@pytest.mark.parametrize("text", ["-1", "-1s", "soon"])
def test_below_zero_is_no_duration_at_all(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=repr(text)):
        duration_or_zero(text)
