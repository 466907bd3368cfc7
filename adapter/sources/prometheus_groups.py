"""Grouped refresh: which keys of a metric share one Prometheus query, and each key's slice of the answer.

A key whose selector holds every label it names to one value (`Selector.pins`) reads exactly one
group of an aggregation `by` its namespace and those labels. Keys of one metric with the same labels
form a `Batch`: one `combined_query(..., by=labels)` answers them all, restricted to the values the
batch asks about, and each key's rows are the rows of its group. Every part of that query is its
per-key form with the group labels kept (`adapter.vocabulary.promql.combined_query`), so a key's slice holds the
same value, target count, raw sample times and gauge gaps as its own query at the same instant.

A key takes its own query when no group can serve it: `!=`, `notin`, a set of several values or `k`
(exists) select several groups; a label a grouped query cannot group by (`le`, the parts' labels);
a user `PromQLSpec`, whose aggregations only its author knows; or a batch of one, which costs one
query either way.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from adapter.sources import Scope
from adapter.sources.prometheus_answer import Row
from adapter.vocabulary.catalogue import MetricDef, PromQLSpec
from adapter.vocabulary.promql import UNGROUPABLE_LABELS
from adapter.vocabulary.selectors import Operator, Requirement

#: the label a namespaced metric's scope becomes (`promql.request_matchers`)
_NAMESPACE = "namespace"


class Batch(NamedTuple):
    """Keys of one metric served by one query grouped `by` these labels."""

    by: tuple[str, ...]
    """The group labels: `namespace` first for a namespaced metric, then the selectors' labels, sorted."""
    indices: list[int]
    """The members' positions in the scopes asked for."""
    groups: list[tuple[str, ...]]
    """Each member's values of `by` (parallel to `indices`); `""` is a label the series lack."""

    def matchers(self) -> list[str]:
        """Matchers keeping only the groups the batch asks about (each label to the values in use).

        They filter series by group labels only, so every group asked for keeps all its series.
        """
        return [
            Requirement(label, Operator.IN, tuple(sorted({group[i] for group in self.groups}))).to_promql()
            for i, label in enumerate(self.by)
        ]

    def sort(self, rows: Iterable[Row], into: dict[tuple[str, ...], list[Row]]) -> None:
        """Add rows of the grouped answer to their groups' lists in `into` (a part of the answer at a time);
        a member's rows are `into[group]` for its entry of `groups`, none when its group has no series."""
        by, absent = self.by, itertools.repeat("")
        for row in rows:
            into.setdefault(tuple(map(row.labels.get, by, absent)), []).append(row)


def _group(metric: MetricDef, scope: Scope) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The labels and values of the one group `scope` selects, or `None` when it is not one group."""
    pins = scope.selector.pins
    if pins is None:
        return None
    labels: list[str] = []
    values: list[str] = []
    if metric.namespaced and scope.namespace is not None:
        labels.append(_NAMESPACE)
        values.append(scope.namespace)
    for label, value in pins:
        # A selector on `namespace` beside the path's namespace may contradict it: its own query says how.
        if label in UNGROUPABLE_LABELS or label in labels:
            return None
        labels.append(label)
        values.append(value)
    return tuple(labels), tuple(values)


class Planner:
    """`plan` a scope at a time, so a caller can spread a fleet's planning over turns of the event loop."""

    def __init__(self, metric: MetricDef) -> None:
        self._metric = metric
        self._own = isinstance(metric.spec, PromQLSpec)  # a user query's aggregations only its author knows
        self._batches: dict[tuple[str, ...], Batch] = {}
        self._alone: list[int] = []

    def add(self, index: int, scope: Scope) -> None:
        """Place the scope at position `index` of the scopes asked for."""
        group = None if self._own else _group(self._metric, scope)
        if group is None:
            self._alone.append(index)
            return
        batch = self._batches.get(group[0])
        if batch is None:
            batch = self._batches[group[0]] = Batch(group[0], [], [])
        batch.indices.append(index)
        batch.groups.append(group[1])

    def plan(self) -> tuple[list[Batch], list[int]]:
        """The batches that share a grouped query, and the positions of scopes that need their own."""
        shared = []
        alone = list(self._alone)
        for batch in self._batches.values():
            if len(batch.indices) == 1:
                alone.extend(batch.indices)
            else:
                shared.append(batch)
        return shared, sorted(alone)


def plan(metric: MetricDef, scopes: Sequence[Scope]) -> tuple[list[Batch], list[int]]:
    """The batches that share a grouped query, and the positions of scopes that need their own."""
    planner = Planner(metric)
    for index, scope in enumerate(scopes):
        planner.add(index, scope)
    return planner.plan()
