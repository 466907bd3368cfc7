"""The one strict reader (adapter/config/strict.py): one error style for every YAML file read."""

from __future__ import annotations

import pytest

from adapter.config.strict import Reader, seconds_of
from adapter.errors import ConfigError


class SampleError(ValueError):
    """A file kind's own error class, as the lab's catalogs and policy files have."""


READ = Reader("sample", SampleError)


def test_every_error_names_the_key_path_the_value_and_what_is_valid() -> None:
    with pytest.raises(SampleError, match=r"^sample key 'a.b\[0\]' value -1 must be a number >= 0$"):
        READ.number("a.b[0]", -1, at_least=0)
    with pytest.raises(SampleError, match=r"^sample key 'n' value 2.5 must be an integer > 0 and <= 4$"):
        READ.number("n", 2.5, integer=True, above=0, at_most=4)
    with pytest.raises(SampleError, match=r"^sample key 'x' value True must be a number$"):
        READ.number("x", True)
    with pytest.raises(SampleError, match=r"^sample key 'c' value 'red' must be one of \['r', 'g'\]$"):
        READ.choice("c", "red", ("r", "g"))
    with pytest.raises(SampleError, match=r"^sample key 'f' value 'yes' must be true or false$"):
        READ.flag("f", "yes")
    with pytest.raises(SampleError, match=r"^sample key 't' value '  ' must be a non-empty string$"):
        READ.text("t", "  ")
    with pytest.raises(SampleError, match=r"^sample key 'l' value \[\] must be a non-empty list$"):
        READ.items("l", [])


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -float("inf")])
def test_a_number_is_finite_whatever_its_bounds(value: float) -> None:
    """YAML's `.inf` and `.nan` are floats: no bound would refuse NaN, so finiteness is checked first."""
    with pytest.raises(SampleError, match="must be a number"):
        READ.number("x", value)


def test_a_section_names_its_unknown_and_missing_keys() -> None:
    allowed = ("name", "flags")
    with pytest.raises(
        SampleError,
        match=(
            r"^sample key 's.flag' is unknown; did you mean 'flags'\? valid keys here: \['flags', "
            r"'name'\]$"
        ),
    ):
        READ.mapping("s", {"name": "a", "flag": ""}, allowed)
    with pytest.raises(SampleError, match=r"^sample key 's.name' is required$"):
        READ.mapping("s", {"flags": ""}, allowed, ("name",))
    with pytest.raises(
        SampleError, match=r"^sample key 's' value 3 must be a mapping with keys from \['flags', 'name'\]$"
    ):
        READ.mapping("s", 3, allowed)
    with pytest.raises(SampleError, match=r"^sample key '<root>' value \[\] must be a mapping"):
        READ.mapping("", [], allowed)
    assert READ.mapping("s", None, allowed) == {}  # a section with every key commented out: its defaults
    with pytest.raises(SampleError, match="'s' passes no check"):
        raise READ.fail("s", "passes no check")  # a rule across keys, in the same words


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(90, 90.0), (1.5, 1.5), ("250ms", 0.25), ("30s", 30.0), (" 2m ", 120.0), ("1h", 3600.0)],
)
def test_a_duration_is_a_unit_or_plain_seconds(value: object, seconds: float) -> None:
    assert READ.duration("d", value) == seconds == seconds_of(value)


@pytest.mark.parametrize("value", ["15", "1e3s", "-1s", "1d", True, None, [1]])
def test_anything_else_is_no_duration(value: object) -> None:
    """A quoted bare number is a string, not seconds: in a file, plain seconds are a YAML number."""
    with pytest.raises(SampleError, match=r"must be a duration such as '30s', '2m' or 15$"):
        READ.duration("d", value)


def test_zero_is_off_only_where_allowed() -> None:
    assert READ.duration("d", "0s", zero=True) == 0.0 == READ.duration("d", 0, zero=True)
    with pytest.raises(SampleError, match=r"value 0 must be a positive duration$"):
        READ.duration("d", 0)
    with pytest.raises(SampleError, match=r"value -2 must be a duration of 0s \(off\) or more$"):
        READ.duration("d", -2, zero=True)
    with pytest.raises(SampleError, match=r"must be a positive duration$"):
        READ.duration("d", float("inf"))


def test_the_configuration_reads_with_the_same_words() -> None:
    """The adapter's reader is the same one, with its own noun and `ConfigError`."""
    with pytest.raises(ConfigError, match=r"^config key 'cache.ttl' value -1 must be a positive duration$"):
        Reader("config").duration("cache.ttl", -1)
