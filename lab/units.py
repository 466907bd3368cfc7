"""Positive numbers and durations as people write them on the lab's command lines.

Durations (`500ms`, `2s`, `10m`, `1h`, or a bare number of seconds) are in the grammar of every YAML
file the project reads (`adapter.config.strict`): one grammar, so `1e3s` or `-1s` is refused by all.
Every duration flag of every lab command takes `duration` (or `duration_or_zero`)."""

from __future__ import annotations

import argparse
import math

from adapter.config.strict import DURATION_RE, DURATION_UNITS


def positive(text: str) -> float:
    """A flag's value that must be a number above zero (an `argparse` type)."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"value {text!r} must be a positive number")
    return value


def _seconds(text: str, *, zero: bool) -> float:
    stripped = text.strip()
    match = DURATION_RE.match(stripped) or DURATION_RE.match(f"{stripped}s")
    if match is None:
        raise argparse.ArgumentTypeError(
            f"duration {text!r} must be a number with a unit, e.g. 500ms, 2s, 10m, 1h (a bare number is "
            "seconds)"
        )
    seconds = float(match.group(1)) * DURATION_UNITS[match.group(2)]
    if zero and seconds == 0:
        return 0.0
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"duration {text!r} must be {'0 or more' if zero else 'positive'}")
    return seconds


def duration(text: str) -> float:
    """A flag's duration in seconds (an `argparse` type), in the grammar of every file the project
    reads (`adapter.config.strict.DURATION_RE`); a bare decimal is seconds."""
    return _seconds(text, zero=False)


def duration_or_zero(text: str) -> float:
    """`duration`, where 0 (`0`, `0s`) is also a value: no cold start, no grace, no window."""
    return _seconds(text, zero=True)


def format_duration(seconds: float) -> str:
    """A short human form: `850ms`, `12.5s`, `4m10s`."""
    if seconds < 1:
        return f"{seconds * 1000:.3g}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s"
