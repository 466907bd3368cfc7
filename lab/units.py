"""Durations as people write them on a command line: `500ms`, `2s`, `10m`, `1h`."""

from __future__ import annotations

import math
import re
from typing import Final

from adapter.config.typed import DURATION_UNITS

_DURATION: Final = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration(text: str) -> float:
    """Seconds in `text` (a bare number is seconds); `ValueError` naming the value otherwise."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"duration {text!r} must be a number with a unit, e.g. 500ms, 2s, 10m, 1h")
    seconds = float(match.group(1)) * DURATION_UNITS[match.group(2) or "s"]
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"duration {text!r} must be positive")
    return seconds


def format_duration(seconds: float) -> str:
    """A short human form: `850ms`, `12.5s`, `4m10s`."""
    if seconds < 1:
        return f"{seconds * 1000:.3g}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s"
