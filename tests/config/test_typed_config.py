"""Strict YAML-to-dataclass conversion: every type the configuration uses, and its error grammar."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from adapter.config.typed import DURATION, load_dataclass, set_key
from adapter.errors import ConfigError


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
        {
            "count": 3,
            "ratio": 2,
            "enabled": True,
            "mode": "b",
            "every": "250ms",
            "tags": ["x", "y"],
            "labels": {"k": "v"},
            "inner": {"name": "n"},
            "either": "error",
        },
        "",
    )
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
        pytest.param(
            [1], "'s' value [1] must be a mapping with keys from ['count', 'either', ", id="not a mapping"
        ),
        pytest.param(
            {"inner": "x"},
            "'s.inner' value 'x' must be a mapping with keys from ['name']",
            id="nested scalar",
        ),
        pytest.param({"labels": 3}, "'s.labels' value 3 must be a mapping", id="scalar for a mapping"),
        pytest.param({"mode": "z" * 500}, "value 'zzz", id="long value is cut"),
    ],
)
def test_errors_name_path_value_and_rule(data: object, message: str) -> None:
    """Each failure names the dotted key path, the bad value and what is valid."""
    with pytest.raises(ConfigError) as caught:
        load_dataclass(Sample, data, "s")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300


def test_empty_section_and_mapping_mean_defaults() -> None:
    """YAML null for a section or a mapping (every entry commented out) is the same as leaving it out."""
    assert load_dataclass(Sample, None, "s") == Sample()
    assert load_dataclass(Sample, {"labels": None}, "s").labels == {}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param({}, {"inner": {"name": "n"}}, id="absent section is created"),
        pytest.param({"inner": None}, {"inner": {"name": "n"}}, id="empty section takes the key"),
        pytest.param({"inner": {"name": "a"}}, {"inner": {"name": "n"}}, id="flag wins over the file"),
    ],
)
def test_set_key_creates_absent_or_empty_sections(data: dict[str, object], expected: object) -> None:
    """A flag override lands in its section whether the file leaves it out or leaves it empty."""
    set_key(data, Sample, "inner.name", "n")
    assert data == expected


@pytest.mark.parametrize("section", [5, "x", [1, 2], True])
def test_set_key_on_a_scalar_or_list_section_names_it(section: object) -> None:
    """A section of the wrong shape is the loading error (naming the key and its keys), not a TypeError."""
    with pytest.raises(
        ConfigError, match=r"^config key 'inner' value .* must be a mapping with keys from \['name'\]$"
    ):
        set_key({"inner": section}, Sample, "inner.name", "n")
