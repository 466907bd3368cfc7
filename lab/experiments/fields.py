"""The catalog's fields read strictly: each error names the key path, the bad value and what is valid."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from lab.units import duration as parse_duration


class CatalogError(ValueError):
    """A catalog that cannot be run; the message names the file, the key path and what is valid."""


def keys(
    where: str, data: Any, allowed: tuple[str, ...], required: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise CatalogError(f"catalog key {where!r} must be a mapping with keys {list(allowed)}")
    for key in data:
        if key not in allowed:
            raise CatalogError(f"catalog key {where}.{key} is not known; keys are {list(allowed)}")
    for key in required:
        if key not in data:
            raise CatalogError(f"catalog key {where}.{key} is missing (required: {list(required)})")
    return data


def number(where: str, value: Any, *, integer: bool = False, low: float = 0.0, above: bool = True) -> Any:
    kinds = (int,) if integer else (int, float)
    rule = f"{'an integer' if integer else 'a number'} {'>' if above else '>='} {low:g}"
    if (
        isinstance(value, bool)
        or not isinstance(value, kinds)
        or not (value > low if above else value >= low)
    ):
        raise CatalogError(f"catalog key {where!r} value {value!r} must be {rule}")
    return value


def duration(where: str, value: Any) -> float:
    try:
        seconds = parse_duration(str(value)) if isinstance(value, str | int | float) else None
    except argparse.ArgumentTypeError:
        seconds = None
    if seconds is None or not seconds > 0 or isinstance(value, bool):
        raise CatalogError(f"catalog key {where!r} value {value!r} must be a duration, e.g. 15s, 500ms, 2m")
    return seconds


def text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise CatalogError(f"catalog key {where!r} value {value!r} must be a non-empty string")
    return value.strip()
