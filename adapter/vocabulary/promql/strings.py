"""PromQL string literals and regular expressions a caller's value cannot escape from.

Every label value the project writes into PromQL goes through `promql_string`; a set of values
matched by `=~` goes through `alternation`, so each value matches only itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

_RE2_META: Final = frozenset("\\.+*?()|[]{}^$")


def promql_string(value: str) -> str:
    """Quote a value as a PromQL double-quoted string literal.

    Backslash and double quote are escaped, and control characters are written as escapes, so no
    input can end the string early or smuggle a matcher after it.
    """
    out = ['"']
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def regex_escape(value: str) -> str:
    """Escape RE2 metacharacters so a value matches only itself inside a PromQL regex."""
    return "".join("\\" + ch if ch in _RE2_META else ch for ch in value)


def alternation(values: Iterable[str]) -> str:
    """An RE2 alternation matching exactly `values` (PromQL anchors a regex matcher at both ends)."""
    return "|".join(regex_escape(v) for v in values)
