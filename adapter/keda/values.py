"""The numbers of the protocol: served values, their integers, and per-replica targets.

KEDA reads `metricValueFloat` when it is above zero and `metricValue` otherwise, and likewise
`targetSizeFloat` before `targetSize` (pkg/scalers/external_scaler.go); the integers are for older
clients. Both are derived here, in one place, from what the HTTP API serves.
"""

from __future__ import annotations

import functools
import math
from typing import Final

from adapter.vocabulary.quantity import format_quantity, parse_quantity

# The protocol's integers are int64.
_INT64_MAX: Final = 2**63 - 1
_INT64_MIN: Final = -(2**63)


@functools.lru_cache(maxsize=4096)  # a key's value changes once per refresh, and is read many times
def served(value: float) -> float:
    """The value exactly as the HTTP API serves it: rounded to the milli-unit (half to even), which is
    what its quantity string (`"730m"`) carries and what the HPA reads (`MilliValue()`)."""
    return parse_quantity(format_quantity(value))


def _int64(value: float) -> int:
    return max(_INT64_MIN, min(_INT64_MAX, int(value)))


def rounded(value: float) -> int:
    """`metricValue`: the served value rounded to an integer (half to even, as quantities round)."""
    return _int64(round(value))


def target_size(target: float) -> int:
    """`targetSize`: the target rounded up, so a client that reads only the integer never divides by 0."""
    return _int64(math.ceil(target))
