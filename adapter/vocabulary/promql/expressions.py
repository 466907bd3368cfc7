"""The project's one PromQL vocabulary.

`selector`, `series` (a family with its aliases), `rate`/`increase`, `aggregate`, the histogram
statistics and `resolved` (a quantile only where its buckets resolve it) are the only places PromQL
is spelt; the adapter, the recording rules, the alerts and the dashboards all build from them. The
catalogue's metrics are written in it by `adapter.vocabulary.promql.catalogue`, and the adapter's
one query per refresh by `adapter.vocabulary.promql.combined`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NewType

from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.promql.strings import promql_string
from adapter.vocabulary.selectors import Selector
from adapter.vocabulary.vllm import Family, split_member

PromQL = NewType("PromQL", str)


def request_matchers(metric: MetricDef, namespace: str | None, selector: Selector) -> list[str]:
    """The label matchers of a request: the namespace first
    (unless the metric opts out), then the selector's."""
    matchers = []
    if metric.namespaced and namespace is not None:
        matchers.append(f"namespace={promql_string(namespace)}")
    matchers.extend(selector.to_promql())
    return matchers


def duration(seconds: float) -> str:
    """A PromQL duration literal (`120s` → `2m`)."""
    whole = int(seconds)
    if whole != seconds:
        return f"{int(seconds * 1000)}ms"
    if whole % 3600 == 0:
        return f"{whole // 3600}h"
    if whole % 60 == 0:
        return f"{whole // 60}m"
    return f"{whole}s"


def selector(name: str, matchers: Sequence[str] = ()) -> str:
    """`name{a="b", c=~"d"}`, or the bare name without matchers (`name{}` alone is not valid PromQL)."""
    return f"{name}{{{', '.join(matchers)}}}" if matchers else name


def member_selector(member: str, matchers: Sequence[str] = ()) -> str:
    """The raw selector of a family member, its fixed labels first: `x{reason="capacity", ns="a"}`."""
    name, fixed = split_member(member)
    return selector(name, [*(f"{key}={promql_string(value)}" for key, value in fixed), *matchers])


def series(family: Family, matchers: Sequence[str] = (), *, mean_over: str = "") -> str:
    """All names of a family, newest preferred: on a pod that exposes two aliases, `or` keeps one.

    A member with fixed labels has them dropped (`label_replace` to empty), so that `or` compares its
    series with the plain names' label sets and keeps the breakdown where a pod exposes both.
    `mean_over` (a duration such as `30s`) reads each series as its mean over that window
    (`smoothed`) instead of its latest sample."""
    parts = []
    for member in family:
        expr = member_selector(member, matchers)
        if mean_over:
            expr = smoothed(expr, mean_over)
        for key, _ in split_member(member)[1]:
            expr = f'label_replace({expr}, "{key}", "", "", "")'
        parts.append(expr)
    return " or ".join(parts)


def smoothed(raw: str, window: str) -> str:
    """`(avg_over_time(raw[window]) and raw)`: a gauge series' mean over the window, for the series
    that still have a current sample only.

    The `and` keeps the value dated honestly: the source dates a value by `timestamp()` of the raw
    selectors, which sees only series with a current sample, so a series that went stale (its pod
    gone: Prometheus wrote a staleness marker, which a range selector ignores) must not go on
    contributing its old mean for up to a window that nothing dates."""
    return f"(avg_over_time({raw}[{window}]) and {raw})"


def _over_window(
    function: str, family: Family, window: str, matchers: Sequence[str], suffix: str, offset: str
) -> str:
    at = f" offset {offset}" if offset else ""
    return " or ".join(f"{function}({selector(name + suffix, matchers)}[{window}]{at})" for name in family)


def rate(
    family: Family, window: str, matchers: Sequence[str] = (), *, suffix: str = "", offset: str = ""
) -> str:
    """`rate()` of every name of a family (`suffix` picks a histogram's `_sum`, `_count` or `_bucket`),
    the windows ending `offset` ago when given (a duration such as `1h`)."""
    return _over_window("rate", family, window, matchers, suffix, offset)


def increase(
    family: Family, window: str, matchers: Sequence[str] = (), *, suffix: str = "", offset: str = ""
) -> str:
    """`increase()` of every name of a family, as `rate`."""
    return _over_window("increase", family, window, matchers, suffix, offset)


def aggregate(operator: str, by: Sequence[str], inner: str) -> str:
    """`sum(inner)`, or `sum by (a, b) (inner)` when grouping."""
    return f"{operator} by ({', '.join(by)}) ({inner})" if by else f"{operator}({inner})"


def histogram_mean(
    family: Family, window: str, matchers: Sequence[str] = (), by: Sequence[str] = (), offset: str = ""
) -> str:
    """Δsum / Δcount over the window: a histogram's mean, resolved whatever its buckets."""
    total = aggregate("sum", by, rate(family, window, matchers, suffix="_sum", offset=offset))
    count = aggregate("sum", by, rate(family, window, matchers, suffix="_count", offset=offset))
    return f"{total} / {count}"


def histogram_quantile(
    quantile: float,
    family: Family,
    window: str,
    matchers: Sequence[str] = (),
    by: Sequence[str] = (),
    offset: str = "",
) -> str:
    """`histogram_quantile` over the family's buckets, summed by `le` and the group labels."""
    buckets = aggregate("sum", ("le", *by), rate(family, window, matchers, suffix="_bucket", offset=offset))
    return f"histogram_quantile({quantile:g}, {buckets})"


def resolved(quantile_expr: str, buckets: Sequence[float]) -> str:
    """The quantile only where the buckets resolve it: above the first finite bound, below the last.

    The PromQL form of `catalogue.checked_value`, the server's rule: inside the first bucket or past
    the last finite one `histogram_quantile` interpolates from nothing, so a graph shows a gap there
    (unresolved), never a made-up value. Without bounds the expression is returned as it is.
    """
    if not buckets:
        return quantile_expr
    return f"({quantile_expr} > {buckets[0]:g}) < {buckets[-1]:g}"


def number(value: float) -> str:
    """A PromQL number literal that parses back to exactly `value` (`24`, `0.85`, `Inf`)."""
    value = float(value)
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:  # beyond 2**53 not every integer is a float
        return str(int(value))
    return repr(value)
