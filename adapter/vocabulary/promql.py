"""The project's one PromQL vocabulary, and the catalogue rendered in it.

`selector`, `series` (a family with its aliases), `rate`/`increase`, `aggregate`, the histogram
statistics and `resolved` (a quantile only where its buckets resolve it) are the only places PromQL
is spelt; the adapter, the recording rules, the alerts and the dashboards all build from them.
`value_query` is the one place a metric's PromQL is written: the Prometheus source sends it, the
recording rules group it by model, and the dashboards plot it with Grafana variables as matchers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, NamedTuple, NewType

from adapter.vocabulary.catalogue import (
    GaugeSpec,
    HistogramSpec,
    MetricDef,
    PromQLSpec,
    SaturationSpec,
    Statistic,
    presence_families,
)
from adapter.vocabulary.promql_parse import ResultType, fill, parse_template, raw_selectors, result_type
from adapter.vocabulary.selectors import Selector, promql_string
from adapter.vocabulary.vllm import Family, family_name, split_member

PromQL = NewType("PromQL", str)

#: the label that tells the parts of a combined query apart; not a Prometheus-reserved name
PART_LABEL: Final = "adapter_part"
#: the label that tells apart several parts of one kind (the selector's number, or the family's name)
REF_LABEL: Final = "adapter_ref"
#: the labels that identify a target in a gauge gap; those a setup does not attach simply stay empty
TARGET_LABELS: Final = ("namespace", "pod", "instance")
#: the label that tells a saturation's terms apart until the per-pod `max` drops it
TERM_LABEL: Final = "adapter_term"
#: labels a grouped query cannot group by: its own parts' labels, and a histogram's bucket bound
UNGROUPABLE_LABELS: Final = frozenset({PART_LABEL, REF_LABEL, TERM_LABEL, "le"})


def request_matchers(metric: MetricDef, namespace: str | None, selector: Selector) -> list[str]:
    """The label matchers of a request: the namespace first (unless the metric opts out), then the selector's."""
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


# --- The vocabulary: every PromQL the project writes is built from these --------------------------


def selector(name: str, matchers: Sequence[str] = ()) -> str:
    """`name{a="b", c=~"d"}`, or the bare name without matchers (`name{}` alone is not valid PromQL)."""
    return f"{name}{{{', '.join(matchers)}}}" if matchers else name


def member_selector(member: str, matchers: Sequence[str] = ()) -> str:
    """The raw selector of a family member, its fixed labels first: `x{reason="capacity", ns="a"}`."""
    name, fixed = split_member(member)
    return selector(name, [*(f"{key}={promql_string(value)}" for key, value in fixed), *matchers])


def series(family: Family, matchers: Sequence[str] = ()) -> str:
    """All names of a family, newest preferred: on a pod that exposes two aliases, `or` keeps one.

    A member with fixed labels has them dropped (`label_replace` to empty), so that `or` compares its
    series with the plain names' label sets and keeps the breakdown where a pod exposes both."""
    parts = []
    for member in family:
        expr = member_selector(member, matchers)
        for key, _ in split_member(member)[1]:
            expr = f'label_replace({expr}, "{key}", "", "", "")'
        parts.append(expr)
    return " or ".join(parts)


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


def rate_forecast(spec: HistogramSpec, matchers: Sequence[str] = (), by: Sequence[str] = ()) -> str:
    """`clamp_min(now + (now - before) x trend_factor, 0)` of the observation rate (`_count`): `now`
    over the last window, `before` over the window before it. While the earlier window has no data
    (a new fleet) the trend counts as 0 rather than leave the value empty, which would read as 0."""
    window = duration(spec.window_seconds)
    now = aggregate("sum", by, rate(spec.family, window, matchers, suffix="_count"))
    before = aggregate("sum", by, rate(spec.family, window, matchers, suffix="_count", offset=window))
    trend = f"(({now} - {before}) or ({now} * 0))"
    return f"clamp_min({now} + {trend} * {number(spec.trend_factor)}, 0)"


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


class Divisors(NamedTuple):
    """The PromQL expressions a saturation divides by: number literals from configuration, or a
    dashboard's variables (`$capacity`). `None` leaves that term out."""

    capacity: str
    kv_target: str | None = None
    queue_target: str | None = None

    @classmethod
    def of(cls, spec: SaturationSpec) -> Divisors:
        """The spec's own parameters as number literals."""
        return cls(
            number(spec.capacity),
            None if spec.kv_target is None else number(spec.kv_target),
            None if spec.queue_target is None else number(spec.queue_target),
        )


def saturation(
    spec: SaturationSpec, matchers: Sequence[str], by: Sequence[str] = (), divisors: Divisors | None = None
) -> str:
    """`avg(per-pod max(inflight / capacity, kv / kv_target, waiting / queue_target))` (`SaturationSpec`).

    A pod is a group of `TARGET_LABELS` (plus `by`, so a grouped answer keeps its groups): Prometheus'
    `instance` tells scrape targets apart even where no `pod` label is attached. Each term is labelled
    with `TERM_LABEL` so that `or` keeps all three of a pod before `max` picks the largest; a pod missing
    a family loses that term only (the gauge gaps make that a 503 anyway).
    """
    divisors = divisors or Divisors.of(spec)
    running, waiting = spec.families[0], spec.families[1]
    pod = tuple(dict.fromkeys((*TARGET_LABELS, *by)))
    waiting_per_pod = aggregate("sum", pod, series(waiting, matchers))
    inflight = f"{aggregate('sum', pod, series(running, matchers))} + {waiting_per_pod}"
    terms = [("inflight", f"({inflight}) / {divisors.capacity}")]
    if divisors.kv_target is not None:
        kv = aggregate("avg", pod, series(spec.families[2], matchers))
        terms.append(("kv", f"{kv} / {divisors.kv_target}"))
    if divisors.queue_target is not None:
        terms.append(("queue", f"{waiting_per_pod} / {divisors.queue_target}"))
    if len(terms) == 1:
        per_pod = terms[0][1]
    else:
        labelled = (f'label_replace({expr}, "{TERM_LABEL}", "{name}", "", "")' for name, expr in terms)
        per_pod = aggregate("max", pod, " or ".join(labelled))
    return aggregate("avg", by, per_pod)


# --- The catalogue in that vocabulary -----------------------------------------------------------------


def value_query(
    metric: MetricDef,
    matchers: Sequence[str],
    *,
    by: Sequence[str] = (),
    offset_seconds: float = 0.0,
    partial_groups: bool = True,
) -> PromQL:
    """The PromQL for the metric's value, for the given label matchers.

    Without `by` the result is a single series. With `by` (e.g. `("namespace", "model_name")`) it is one
    series per group, as recording rules need; a gauge summing several families then keeps a group that
    exposes only some of them, unless `partial_groups` is false: then a group has a value exactly
    when the ungrouped query over that group's series would (the adapter's grouped refresh). A user-defined `PromQLSpec` query is not regrouped: its grouping is its
    author's. `offset_seconds` evaluates a histogram's windows that long ago (a baseline); it raises
    `ValueError` for any other kind of metric rather than be silently ignored.
    """
    spec = metric.spec
    if offset_seconds and not isinstance(spec, HistogramSpec):
        raise ValueError(
            f"offset {offset_seconds:g}s must only be used with a histogram metric, not {metric.name!r}"
        )
    if isinstance(spec, PromQLSpec):
        return PromQL(fill(spec.query, matchers))
    if isinstance(spec, SaturationSpec):
        return PromQL(saturation(spec, matchers, by))
    if isinstance(spec, GaugeSpec):
        terms = [aggregate(spec.aggregation.value, by, series(family, matchers)) for family in spec.families]
        if len(terms) == 1:
            return PromQL(terms[0])
        if by and partial_groups:
            # `a + b` between grouped vectors drops a group missing from either side; the `or` terms
            # bring such a group back with the families it has.
            return PromQL(" or ".join([f"({' + '.join(terms)})", *terms]))
        # Each family is aggregated on its own: `a + b` between vectors would silently drop pods
        # that expose only one of them; summing scalars of sums cannot.
        return PromQL(" + ".join(terms))
    window = duration(spec.window_seconds)
    offset = duration(offset_seconds) if offset_seconds else ""
    if spec.statistic is Statistic.FORECAST:
        if offset_seconds:
            raise ValueError(f"offset must not be used with the forecast {metric.name!r}")
        return PromQL(rate_forecast(spec, matchers, by))
    if spec.statistic is Statistic.MEAN:
        return PromQL(histogram_mean(spec.family, window, matchers, by, offset))
    return PromQL(histogram_quantile(spec.quantile, spec.family, window, matchers, by, offset))


def served_query(metric: MetricDef, matchers: Sequence[str], *, by: Sequence[str] = ()) -> PromQL:
    """`value_query` without the values the adapter refuses to serve (`catalogue.checked_value`): a
    quantile outside its resolved buckets is dropped, so a graph has a gap where the HPA gets a 503."""
    query = value_query(metric, matchers, by=by)
    spec = metric.spec
    if isinstance(spec, HistogramSpec) and spec.statistic is Statistic.QUANTILE:
        return PromQL(resolved(query, spec.buckets))
    return query


def presence_query(metric: MetricDef, matchers: Sequence[str]) -> PromQL | None:
    """A series selector whose series exist exactly when the metric's targets do, or `None`."""
    spec = metric.spec
    if isinstance(spec, PromQLSpec):
        if spec.presence is None:
            return None
        return PromQL(fill(spec.presence, matchers))
    families = presence_families(spec)
    return PromQL(" or ".join(f"({series(family, matchers)})" for family in families))


class Part:
    """The values of `PART_LABEL`: what each series of a combined answer reports."""

    VALUE = "value"
    """the metric's value (at most one series)"""
    COUNT = "count"
    """how many target series exist (only when the metric has a presence query)"""
    TIMESTAMP = "timestamp"
    """the oldest sample time of one raw selector (`REF_LABEL` numbers the selector)"""
    ABSENT = "absent"
    """a target lacking a gauge family (`REF_LABEL` names the family, `TARGET_LABELS` the target)"""
    NONFINITE = "nonfinite"
    """a target whose gauge family is NaN or ±Inf (value NaN or +Inf; labelled as `ABSENT`)"""


def _ref(expr: str, ref: str) -> str:
    return f'label_replace({expr}, "{REF_LABEL}", "{ref}", "", "")'


def _part(expr: str, part: str, ref: str | None = None) -> str:
    labelled = f'label_replace({expr}, "{PART_LABEL}", "{part}", "", "")'
    return labelled if ref is None else _ref(labelled, ref)


def freshness_selectors(metric: MetricDef, matchers: Sequence[str]) -> tuple[str, ...]:
    """The raw vector selectors whose sample times date the metric's value.

    `timestamp()` is taken of these alone: Prometheus answers `timestamp()` of any expression but a
    plain selector with the evaluation time, so `timestamp(a or b)` would call anything fresh. For the
    catalogue they are each name of each presence family (a histogram's `_count`, every gauge family);
    for user PromQL every selector the parser finds in the query and the presence query, those that
    only filter (the right side of `and`/`unless`) included: they decided the value too.
    """
    spec = metric.spec
    if isinstance(spec, PromQLSpec):
        found = raw_selectors(parse_template(spec.query, matchers))
        if spec.presence is not None:
            found += raw_selectors(parse_template(spec.presence, matchers))
        return tuple(dict.fromkeys(found))
    # A family may prove presence and be summed too (the plain waiting gauge): each selector once.
    return tuple(
        dict.fromkeys(member_selector(m, matchers) for family in presence_families(spec) for m in family)
    )


def _user_value(spec: PromQLSpec, matchers: Sequence[str]) -> str:
    query = fill(spec.query, matchers)
    if result_type(parse_template(spec.query, matchers)) is ResultType.SCALAR:
        return f"vector({query})"  # label_replace needs a vector; a scalar becomes one unlabelled series
    return f"({query})"


def _gap_parts(spec: GaugeSpec, matchers: Sequence[str], group: Sequence[str]) -> list[str]:
    """Per family: the targets (pods with any presence family) that lack it, and those where it is NaN/Inf
    (per target and `group`, so a grouped answer keeps each group's gaps apart)."""
    by = f"by ({', '.join(dict.fromkeys((*TARGET_LABELS, *group)))})"
    every = " or ".join(series(family, matchers) for family in presence_families(spec))
    parts = []
    for family in spec.families:
        missing = f"group {by} ({every}) unless group {by} ({series(family, matchers)})"
        parts.append(_part(missing, Part.ABSENT, family_name(family)))
        # `x != x` keeps exactly the NaN samples; `max` prefers +Inf over NaN within one target.
        odd = " or ".join(
            f"{sel} != {sel} or abs({sel}) == Inf" for sel in (member_selector(m, matchers) for m in family)
        )
        parts.append(_part(f"max {by} ({odd})", Part.NONFINITE, family_name(family)))
    return parts


def combined_query(metric: MetricDef, matchers: Sequence[str], by: Sequence[str] = ()) -> PromQL:
    """One query answering value, target count, raw sample times and gauge gaps together.

    One round trip per refresh keeps the upstream load at one query per key, and every part is
    evaluated at the same instant, so "empty" versus "no targets" is never decided on mixed data.
    Each series carries `adapter_part` (a `Part`); `min(timestamp(selector))` comes once per raw
    selector (`freshness_selectors`), told apart by `adapter_ref` so that `or` keeps them all, and
    the source takes the oldest.

    With `by` every part is computed per group of those labels (never for a user `PromQLSpec`, whose
    grouping is its author's: `ValueError`), so one answer holds, group by group, exactly what the
    query without `by` gives over that group's series: each aggregation keeps the group labels and
    nothing else changes, so every group sums the same series in the same order. The raw selectors'
    times then come as one row per group, the oldest over all of them (what the source takes from
    the per-selector rows anyway), which halves a grouped answer of a thousand groups.
    """
    spec = metric.spec
    if isinstance(spec, PromQLSpec):
        if by:
            raise ValueError(f"user PromQL of {metric.name!r} must not be regrouped by {list(by)}")
        value = _user_value(spec, matchers)
    else:
        value = f"({value_query(metric, matchers, by=by, partial_groups=False)})"
    parts = [_part(value, Part.VALUE)]
    presence = presence_query(metric, matchers)
    if presence is not None:
        parts.append(_part(aggregate("count", by, presence), Part.COUNT))
    stamps = [
        _ref(f"timestamp({raw})", str(i)) for i, raw in enumerate(freshness_selectors(metric, matchers))
    ]
    if by and stamps:
        # The refs keep `or` from merging a pod's series of different selectors (same labels once
        # `timestamp` drops the name) before `min` takes the oldest of them all.
        parts.append(_part(aggregate("min", by, " or ".join(stamps)), Part.TIMESTAMP))
    else:
        for index, raw in enumerate(freshness_selectors(metric, matchers)):
            parts.append(_part(f"min(timestamp({raw}))", Part.TIMESTAMP, str(index)))
    if isinstance(spec, GaugeSpec) and not spec.lazy:
        parts.extend(_gap_parts(spec, matchers, by))
    return PromQL(" or ".join(parts))
