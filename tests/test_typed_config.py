"""Strict YAML-to-dataclass conversion: every type the configuration uses, and its error grammar."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from adapter.errors import ConfigError
from adapter.typed_config import DURATION, load_dataclass


@dataclass(frozen=True)
class Inner:
    name: str


@dataclass(frozen=True)
class Sample:
    count: int = 1
    ratio: float = 0.5
    enabled: bool = False
    mode: Literal["a", "b"] = "a"
    every: float = field(default=1.0, metadata=DURATION)
    tags: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    inner: Inner | None = None
    either: float | Literal["error"] | None = None


def test_converts_every_supported_type() -> None:
    """Lists become tuples, ints widen to floats, durations parse, nested dataclasses load."""
    loaded = load_dataclass(
        Sample,
        {"count": 3, "ratio": 2, "enabled": True, "mode": "b", "every": "250ms", "tags": ["x", "y"],
         "labels": {"k": "v"}, "inner": {"name": "n"}, "either": "error"},
        "",
    )  # fmt: skip
    assert loaded == Sample(3, 2.0, True, "b", 0.25, ("x", "y"), {"k": "v"}, Inner("n"), "error")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param({"count": True}, "'s.count' value True must be an integer", id="bool is not an int"),
        pytest.param({"ratio": "1"}, "'s.ratio' value '1' must be a number", id="string is not a number"),
        pytest.param({"tags": "x"}, "'s.tags' value 'x' must be a list", id="scalar is not a list"),
        pytest.param(
            {"tags": [1]}, "'s.tags[0]' value 1 must be a string", id="list items are checked by index"
        ),
        pytest.param(
            {"labels": {"k": 1}}, "'s.labels.k' value 1 must be a string", id="mapping values checked"
        ),
        pytest.param({"inner": {}}, "'s.inner.name' is required", id="nested required key"),
        pytest.param({"inner": {"name": "n", "x": 1}}, "'s.inner.x' is unknown", id="nested unknown key"),
        pytest.param(
            {"either": "nope"}, "must be a number or one of ['error']", id="union names every choice"
        ),
        pytest.param({"every": "1d"}, "must be a duration such as '30s'", id="unsupported duration unit"),
        pytest.param({"every": 0}, "must be a positive duration", id="zero duration"),
        pytest.param([1], "'s' value [1] must be a mapping", id="not a mapping"),
    ],
)
def test_errors_name_path_value_and_rule(data: object, message: str) -> None:
    """Each failure names the dotted key path, the bad value and what is valid."""
    with pytest.raises(ConfigError) as caught:
        load_dataclass(Sample, data, "s")
    assert message in str(caught.value)
