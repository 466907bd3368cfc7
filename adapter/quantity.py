"""Kubernetes resource quantities for metric values.

The HPA reads external metric values with `Quantity.MilliValue()`, so anything finer than a
thousandth is lost on its side anyway; we round to the nearest milli-unit and print integers plainly
(`"12"`) and fractions in milli-units (`"730m"`), the canonical form the kube-apiserver would print.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Decimal


def format_quantity(value: float) -> str:
    """Format a finite float as a Kubernetes quantity string.

    Raises `ValueError` for NaN or infinities: a non-finite value is never a quantity, and the
    caller must have turned it into an error (or an empty result) before this point.
    """
    if not math.isfinite(value):
        raise ValueError(f"value {value!r} is not a finite number and cannot be a quantity")
    milli = int((Decimal(repr(value)) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"


def parse_quantity(text: str) -> float:
    """Parse the decimal-SI subset of Kubernetes quantities this adapter emits (and HPA targets use).

    Supports plain numbers, exponents (`1e3`) and the suffixes n, u, m, k, M, G, T, P, E,
    Ki, Mi, Gi, Ti, Pi, Ei.
    """
    suffixes = {
        "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
        "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
        "P": Decimal("1e15"), "E": Decimal("1e18"),
        "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
        "Pi": Decimal(2**50), "Ei": Decimal(2**60),
    }  # fmt: skip
    stripped = text.strip()
    for suffix in sorted(suffixes, key=len, reverse=True):
        if suffix and stripped.endswith(suffix):
            number = stripped[: -len(suffix)]
            break
    else:
        suffix, number = "", stripped
    try:
        return float(Decimal(number) * suffixes[suffix])
    except ArithmeticError as exc:
        raise ValueError(
            f"quantity {text!r} must be a number with an optional SI suffix, e.g. '750m'"
        ) from exc
