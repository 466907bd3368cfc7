"""A static check of user PromQL: counters and histogram series must go through `rate()`.

A raw counter (`*_total`), histogram sum/count (`*_sum`, `*_count`) or bucket (`*_bucket`) grows
since the process started, so an HPA fed with it scales on history, not load. This is a lexical
check (a tokenizer, not a full PromQL parser): it finds metric selectors and the functions that
enclose them, and it understands grouping clauses, label matchers, ranges and strings.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"""
    (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<number>[0-9][0-9a-zA-Z_.+-]*)
  | (?P<open>[(\[{])
  | (?P<close>[)\]}])
  | (?P<other>\S)
    """,
    re.VERBOSE,
)
_CUMULATIVE = re.compile(r"(_total|_sum|_count|_bucket)$")
# Functions that turn a cumulative series into a per-second or per-window quantity, or that only
# look at a series' existence or timing.
_ALLOWED_AROUND = frozenset(
    {"rate", "irate", "increase", "resets", "changes", "absent", "absent_over_time", "present_over_time",
     "timestamp", "count", "group", "count_over_time", "histogram_count", "histogram_sum"}
)  # fmt: skip
_GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2", "start", "end"})


def raw_cumulative_series(query: str) -> list[str]:
    """Names of counter or histogram series used in `query` without an enclosing `rate()`-like call."""
    found: list[str] = []
    stack: list[str] = []  # one entry per open bracket: the function name, or "(" / "[" / "{"
    tokens = list(_TOKEN.finditer(query))
    skip_group = False
    for index, token in enumerate(tokens):
        kind, text = token.lastgroup, token.group()
        if kind == "open":
            if text == "(":
                previous = tokens[index - 1] if index else None
                if skip_group:
                    stack.append("grouping")
                    skip_group = False
                elif previous is not None and previous.lastgroup == "ident":
                    stack.append(previous.group().lower())
                else:
                    stack.append("(")
            else:
                stack.append(text)
            continue
        if kind == "close":
            if stack:
                stack.pop()
            continue
        if kind != "ident" or any(frame in ("{", "[", "grouping") for frame in stack):
            continue
        lowered = text.lower()
        if lowered in _GROUPING:
            skip_group = True
            continue
        following = tokens[index + 1].group() if index + 1 < len(tokens) else ""
        if following == "(" or lowered in _KEYWORDS:
            continue
        if _CUMULATIVE.search(text) and not any(frame in _ALLOWED_AROUND for frame in stack):
            found.append(text)
    return found
