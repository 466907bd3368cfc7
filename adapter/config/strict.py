"""The one strict reader of every YAML file the project reads, and its one error style.

The adapter's configuration is read through it (`typed.load_dataclass`, a dataclass tree), and so
are the lab's experiment catalogs and backtest policy files (`Reader`, key by key, since their
checks cross keys). The lab may import the adapter, never the reverse, so it lives here.

Every error is one line naming the key path, the value (cut when long) and what would be valid:

    config key 'cache.ttl' value -1 must be a positive duration
    catalog key 'measure.knee_steps' value 0 must be an integer > 0
    policy key 'policies[0].tolerance' value -1 must be a number >= 0
    policy key 'policies[0].metrc' is unknown; did you mean 'metric'? valid keys here: [...]

The noun names the kind of file; the caller that knows the file's path puts it in front.
Durations have one grammar, here and on the lab's flags: `250ms`, `30s`, `2m`, `1h`, or a plain
number of seconds (a YAML number here, a bare decimal on a command line).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from adapter.errors import ConfigError

#: a decimal number and a unit (`250ms`, `30s`, `2m`, `1h`); no sign, no exponent, so `1e3s` and
#: `-1s` are refused wherever a duration is read
DURATION_RE: Final = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
#: seconds per duration unit
DURATION_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
#: what a duration looks like, in every message that refuses one
DURATION_EXAMPLE: Final = "a duration such as '30s', '2m' or 15"

#: characters of a bad value quoted in an error: enough to recognise it, and one short line
_SHOWN_MAX: Final = 80


def shown(value: object) -> str:
    """`repr(value)`, cut to `_SHOWN_MAX` characters so an error stays one readable line."""
    text = repr(value)
    return text if len(text) <= _SHOWN_MAX else f"{text[:_SHOWN_MAX]}... ({len(text)} characters)"


def child(path: str, key: object) -> str:
    """The key path of `key` inside the section at `path` ("" is the file's top level)."""
    return f"{path}.{key}" if path else str(key)


def seconds_of(value: object) -> float | None:
    """Seconds from a duration as written (`90`, `1.5`, `"250ms"`, `"2m"`); `None` when it is not one.

    Neither sign nor range is checked here: `Reader.duration` says what is allowed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and (match := DURATION_RE.match(value.strip())):
        return float(match.group(1)) * DURATION_UNITS[match.group(2)]
    return None


def _bounds(at_least: float | None, above: float | None, at_most: float | None) -> str:
    """`>= 0`, `> 0 and <= 1`: the range part of a number's rule."""
    parts = [
        f"{op} {bound:g}"
        for op, bound in ((">=", at_least), (">", above), ("<=", at_most))
        if bound is not None
    ]
    return " and ".join(parts)


@dataclass(frozen=True)
class Reader:
    """Reads one kind of file (`noun`: config, catalog, policy); every failure is an `error`."""

    noun: str
    error: type[Exception] = ConfigError

    def fail(self, path: str, text: str) -> Exception:
        """`<noun> key '<path>' <text>`: a rule that crosses keys, said in the file's words."""
        return self.error(f"{self.noun} key {path or '<root>'!r} {text}")

    def invalid(self, path: str, value: object, wanted: str) -> Exception:
        """The one message: the key path, the value and what is valid."""
        return self.fail(path, f"value {shown(value)} must be {wanted}")

    def required(self, path: str) -> Exception:
        return self.fail(path, "is required")

    def unknown(self, path: str, key: object, valid: Collection[str], meant: Sequence[str] = ()) -> Exception:
        """`key` is not one of `valid` at `path`: the key likely meant (a close spelling), then all."""
        meant = list(meant) or difflib.get_close_matches(str(key), list(valid), n=1, cutoff=0.6)
        hint = " did you mean " + " or ".join(repr(m) for m in meant) + "?" if meant else ""
        return self.fail(child(path, key), f"is unknown;{hint} valid keys here: {sorted(valid)}")

    def mapping(
        self, path: str, data: object, allowed: Collection[str], required: Sequence[str] = ()
    ) -> Mapping[str, Any]:
        """A section with keys from `allowed`, each of `required` present; empty (YAML `null`) is `{}`,
        as a section with every key commented out means its defaults."""
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise self.invalid(path, data, f"a mapping with keys from {sorted(allowed)}")
        for key in data:
            if key not in allowed:
                raise self.unknown(path, key, allowed)
        for key in required:
            if key not in data:
                raise self.required(child(path, key))
        return data

    def number(
        self,
        path: str,
        value: object,
        *,
        integer: bool = False,
        at_least: float | None = None,
        above: float | None = None,
        at_most: float | None = None,
    ) -> Any:
        """A finite number (an integer when `integer`) inside the bounds given; `true` is no number."""
        kinds = (int,) if integer else (int, float)
        bounds = _bounds(at_least, above, at_most)
        wanted = f"{'an integer' if integer else 'a number'}{' ' + bounds if bounds else ''}"
        if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
            raise self.invalid(path, value, wanted)
        if (
            (at_least is not None and not value >= at_least)
            or (above is not None and not value > above)
            or (at_most is not None and not value <= at_most)
        ):
            raise self.invalid(path, value, wanted)
        return value

    def duration(self, path: str, value: object, *, zero: bool = False) -> float:
        """Seconds from `90`, `1.5`, `"250ms"`, `"30s"`,
        `"2m"` or `"1h"`; also `0`/`"0s"` (off) when `zero`."""
        seconds = seconds_of(value)
        if seconds is None:
            raise self.invalid(path, value, DURATION_EXAMPLE)
        if zero and seconds == 0:
            return 0.0
        if not math.isfinite(seconds) or seconds <= 0:
            raise self.invalid(
                path, value, "a duration of 0s (off) or more" if zero else "a positive duration"
            )
        return seconds

    def text(self, path: str, value: object) -> str:
        """A string with something in it, stripped."""
        if not isinstance(value, str) or not value.strip():
            raise self.invalid(path, value, "a non-empty string")
        return value.strip()

    def choice(self, path: str, value: object, allowed: Sequence[Any]) -> Any:
        """One of `allowed`, as written."""
        if isinstance(value, bool) or value not in allowed:
            raise self.invalid(path, value, f"one of {list(allowed)}")
        return value

    def flag(self, path: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.invalid(path, value, "true or false")
        return value

    def items(self, path: str, value: object, what: str = "a non-empty list") -> list[Any]:
        """A non-empty list; `what` says what its entries are, for the message."""
        if not isinstance(value, list) or not value:
            raise self.invalid(path, value, what)
        return value
