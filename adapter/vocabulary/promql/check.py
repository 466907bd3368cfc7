"""A static check of user PromQL: counters and histogram series must go through `rate()`.

A raw counter (`*_total`), histogram sum/count (`*_sum`, `*_count`) or bucket (`*_bucket`) grows since the
process started, so an HPA fed with it scales on history, not load. The query is read by the PromQL parser
(`adapter.vocabulary.promql.parse`), so label names, strings and grouping clauses that end in `_total` are
never mistaken for series.
"""

from __future__ import annotations

from typing import Final

from adapter.vocabulary.promql.parse import cumulative_outside, parse_template

_CUMULATIVE: Final = ("_total", "_sum", "_count", "_bucket")
# Functions and aggregations that turn a cumulative series into a per-second or per-window
# quantity, or that only look at a series' existence or timing.
_ALLOWED_AROUND: Final = frozenset(
    {
        "rate",
        "irate",
        "increase",
        "resets",
        "changes",
        "absent",
        "absent_over_time",
        "present_over_time",
        "timestamp",
        "count",
        "group",
        "count_over_time",
        "histogram_count",
        "histogram_sum",
    }
)
# Stands in for `<<.LabelMatchers>>`, which the parser cannot read; any valid matcher does.
_SAMPLE_MATCHER: Final = ('namespace="default"',)


def raw_cumulative_series(query: str) -> list[str]:
    """Names of counter or histogram series used in `query` without an enclosing `rate()`-like call.

    Raises `adapter.errors.PromQLSyntaxError` when the query is not PromQL.
    """
    return cumulative_outside(parse_template(query, _SAMPLE_MATCHER), _CUMULATIVE, _ALLOWED_AROUND)
