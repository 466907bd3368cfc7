"""The adapter's one query per refresh: a metric's value with what dates and qualifies it.

`combined_query` answers value, target count, raw sample times and gauge gaps in one round trip;
`Part`, `PART_LABEL` and `REF_LABEL` tell its series apart for the source that reads the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from adapter.vocabulary.catalogue import GaugeSpec, MetricDef, PromQLSpec, presence_families
from adapter.vocabulary.promql.catalogue import (
    TARGET_LABELS,
    TERM_LABEL,
    gauge_series,
    presence_query,
    value_query,
)
from adapter.vocabulary.promql.expressions import (
    PromQL,
    aggregate,
    duration,
    member_selector,
    series,
    smoothed,
)
from adapter.vocabulary.promql.parse import ResultType, fill, parse_template, raw_selectors, result_type
from adapter.vocabulary.vllm import family_name

#: the label that tells the parts of a combined query apart; not a Prometheus-reserved name
PART_LABEL: Final = "adapter_part"
#: the label that tells apart several parts of one kind (the selector's number, or the family's name)
REF_LABEL: Final = "adapter_ref"
#: labels a grouped query cannot group by: its own parts' labels, and a histogram's bucket bound
UNGROUPABLE_LABELS: Final = frozenset({PART_LABEL, REF_LABEL, TERM_LABEL, "le"})


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
    (per target and `group`, so a grouped answer keeps each group's gaps apart).

    A smoothed gauge is judged as its value reads it: a target whose family has no sample inside the
    smoothing window (a window shorter than Prometheus' scrape interval) lacks it, rather than
    silently drop out of a sum, and one with a NaN or Inf anywhere in the window is non-finite."""
    by = f"by ({', '.join(dict.fromkeys((*TARGET_LABELS, *group)))})"
    every = " or ".join(series(family, matchers) for family in presence_families(spec))
    window = duration(spec.smoothing_seconds) if spec.smoothing_seconds else ""
    parts = []
    for family in spec.families:
        missing = f"group {by} ({every}) unless group {by} ({gauge_series(spec, family, matchers)})"
        parts.append(_part(missing, Part.ABSENT, family_name(family)))
        read = (member_selector(m, matchers) for m in family)
        if window:
            read = (smoothed(sel, window) for sel in read)
        # `x != x` keeps exactly the NaN samples; `max` prefers +Inf over NaN within one target.
        odd = " or ".join(f"{sel} != {sel} or abs({sel}) == Inf" for sel in read)
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
