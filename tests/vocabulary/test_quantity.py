"""Quantities: what the HPA reads with `MilliValue()`."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from adapter.vocabulary.quantity import format_quantity, parse_decimal, parse_quantity


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(0.0, "0", id="zero"),
        pytest.param(12.0, "12", id="integer plainly"),
        pytest.param(0.73, "730m", id="fraction in milli-units"),
        pytest.param(0.5, "500m", id="half"),
        pytest.param(1.5, "1500m", id="mixed number in milli-units"),
        pytest.param(0.0017, "2m", id="sub-milli rounds to nearest milli"),
        pytest.param(0.0004, "0", id="below half a milli rounds to zero"),
        pytest.param(0.0025, "2m", id="ties round to even"),
        pytest.param(-0.25, "-250m", id="negative"),
        pytest.param(1e12, "1000000000000", id="large integer without exponent"),
        pytest.param(123456.789, "123456789m", id="large fraction keeps milli precision"),
        pytest.param(0.1 + 0.2, "300m", id="binary float noise does not leak"),
    ],
)
def test_format_quantity(value: float, text: str) -> None:
    """Integers print plainly, fractions as milli-units, rounded half-even."""
    assert format_quantity(value) == text


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_is_never_a_quantity(value: float) -> None:
    """NaN and infinities must have become errors before formatting."""
    with pytest.raises(ValueError, match="not a finite number"):
        format_quantity(value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("730m", 0.73, id="milli"),
        pytest.param("12", 12.0, id="plain"),
        pytest.param("1.5k", 1500.0, id="kilo"),
        pytest.param("2Ki", 2048.0, id="binary kibi"),
        pytest.param("1e3", 1000.0, id="exponent"),
        pytest.param("250u", 0.00025, id="micro"),
    ],
)
def test_parse_quantity(text: str, value: float) -> None:
    """HPA targets in the chart and the demo parse as Kubernetes would."""
    assert parse_quantity(text) == pytest.approx(value)


def test_parse_quantity_rejects_garbage() -> None:
    """A malformed quantity names itself and an example."""
    with pytest.raises(ValueError, match="'abc' must be a number"):
        parse_quantity("abc")


@pytest.mark.parametrize("value", [0.0, 0.001, 0.73, 1.0, 7.25, 599.0, 1234.5])
def test_round_trip(value: float) -> None:
    """format → parse returns the milli-rounded value."""
    assert parse_quantity(format_quantity(value)) == pytest.approx(round(value, 3))


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        pytest.param("3P", Decimal("3e15"), id="peta"),
        pytest.param("2E", Decimal("2e18"), id="exa"),
        pytest.param("1E3", Decimal(1000), id="capital E with digits is an exponent"),
        pytest.param("1Pi", Decimal(2**50), id="pebi"),
        pytest.param("1.5Ei", Decimal(3 * 2**59), id="exbi"),
        pytest.param(
            "1.0000000000000000000000000000001k", Decimal("1000.0000000000000000000000000001"), id="exact"
        ),
    ],
)
def test_parse_decimal_is_exact(text: str, exact: Decimal) -> None:
    """Every Kubernetes suffix, with no float or context rounding (the HPA model rounds the result)."""
    assert parse_decimal(text) == exact


@pytest.mark.parametrize("text", ["nan", "inf", "1_000", "1.5e3k", "1Ki3", "1 k", ""])
def test_parse_decimal_takes_only_the_kubernetes_grammar(text: str) -> None:
    """What `resource.ParseQuantity` refuses is refused here too, rather than read by `Decimal`."""
    with pytest.raises(ValueError, match="must be a number with an optional SI suffix"):
        parse_decimal(text)
