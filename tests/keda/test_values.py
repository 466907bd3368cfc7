"""The protocol's numbers: served values, their integers and targets."""

from __future__ import annotations

import pytest

from adapter.keda import values
from adapter.vocabulary.quantity import format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("value", "served"),
    [
        pytest.param(0.7304, 0.73, id="to the milli-unit"),
        pytest.param(0.0005, 0.0, id="half a milli-unit rounds to even (0)"),
        pytest.param(0.0015, 0.002, id="one and a half milli-units round to even (2)"),
        pytest.param(12.0, 12.0, id="integers unchanged"),
        pytest.param(1e15, 1e15, id="large values unchanged"),
    ],
)
def test_served_is_the_http_quantity(value: float, served: float) -> None:
    """`served` is exactly the float the HTTP API's quantity string stands for."""
    assert values.served(value) == served == parse_quantity(format_quantity(value))


@pytest.mark.parametrize(
    ("value", "integer"),
    [(0.0, 0), (0.499, 0), (0.5, 0), (1.5, 2), (2.5, 2), (7.73, 8), (1e30, 2**63 - 1)],
    ids=[
        "zero",
        "below half",
        "half to even down",
        "half to even up",
        "2.5 to even",
        "fraction",
        "clamped to int64",
    ],
)
def test_rounded(value: float, integer: int) -> None:
    """`metricValue` rounds half to even, as quantities do, and stays within int64."""
    assert values.rounded(value) == integer


@pytest.mark.parametrize(("target", "size"), [(0.001, 1), (0.5, 1), (1.0, 1), (7.25, 8), (50.0, 50)])
def test_target_size_rounds_up_so_it_is_never_zero(target: float, size: int) -> None:
    """`targetSize` is the target rounded up: an integer-only client never gets a zero target."""
    assert values.target_size(target) == size
