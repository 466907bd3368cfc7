"""Kubernetes resource quantities: the metric values the adapter serves, and the one parser of quantities.

The HPA reads external metric values with `Quantity.MilliValue()`, so anything finer than a
thousandth is lost on its side anyway; we round to the nearest milli-unit and print integers plainly
(`"12"`) and fractions in milli-units (`"730m"`), the canonical form the kube-apiserver would print.
`parse_decimal` reads any quantity exactly, as `resource.ParseQuantity` does (the lab's HPA model
rounds its result as `MilliValue()` does).
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from typing import Final


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


def parse_decimal(text: str) -> Decimal:
    """Parse a Kubernetes quantity exactly: `<signed number><suffix>` as `resource.ParseQuantity` reads it.

    The suffix is a decimal SI one (n, u, m, k, M, G, T, P, E), a binary one (Ki, Mi, Gi, Ti, Pi,
    Ei) or a decimal exponent (`1e3`, `5E-2`); "1E" is 10^18 and "1E3" is 1000, as in Kubernetes.
    Raises `ValueError` for anything else (NaN, infinities, `1_000`, `1.5e3k`, an unknown suffix).
    Surrounding whitespace is ignored. Exact: callers that round (the HPA's `MilliValue()`) round
    the true value, not a float's approximation of it.
    """
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"quantity {text!r} must be a number with an optional SI suffix, e.g. '750m'")
    number, exponent, suffix = match.groups()
    if exponent is not None:
        return Decimal(number + exponent)  # construction is exact, whatever the context
    # Enough digits for the number times the longest multiplier (2**60, 19 digits): no rounding.
    with localcontext(prec=len(number) + 20):
        return Decimal(number) * _SUFFIXES[suffix or ""]


def parse_quantity(text: str) -> float:
    """A Kubernetes quantity as a float (`parse_decimal`, then rounded to the nearest double)."""
    return float(parse_decimal(text))


_SUFFIXES: Final = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
# <sign>?<digits>[.<digits>] then an exponent or a suffix; an exponent needs digits, so "1E" is exa.
_QUANTITY: Final = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|([KMGTPE]i|[numkMGTPE])?)"
)
