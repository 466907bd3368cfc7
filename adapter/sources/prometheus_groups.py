"""Grouped refresh: which keys of a metric share one Prometheus query, and each key's slice of the answer.

A key whose selector holds every label it names to one value (`Selector.pins`) reads exactly one group of an
aggregation `by` its namespace and those labels. Keys of one metric with the same labels form a `Batch`: one
`combined_query(..., by=labels)` answers them all, restricted to the values the batch asks about, and each
key's rows are the rows of its group (`Slices` reads them into each group's `Facts` as the answer is decoded).
Every part of that query is its per-key form with the group labels kept
(`adapter.vocabulary.promql.combined.combined_query`), so a key's slice holds the same value, target count,
raw sample times and gauge gaps as its own query at the same instant.

A key takes its own query when no group can serve it: `!=`, `notin`, a set of several values or `k`
(exists) select several groups; a label a grouped query cannot group by (`le`, the parts' labels);
a user `PromQLSpec`, whose aggregations only its author knows; or a batch of one, which costs one
query either way.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

from adapter.errors import AdapterError
from adapter.sources import Sample, Scope
from adapter.sources.prometheus_answer import Facts, series
from adapter.vocabulary.catalogue import MetricDef, PromQLSpec
from adapter.vocabulary.promql.combined import UNGROUPABLE_LABELS
from adapter.vocabulary.selectors import Operator, Requirement

#: the label a namespaced metric's scope becomes (`promql.expressions.request_matchers`)
_NAMESPACE = "namespace"


class Batch(NamedTuple):
    """Keys of one metric served by one query grouped `by` these labels."""

    by: tuple[str, ...]
    """The group labels: `namespace` first for a namespaced metric, then the selectors' labels, sorted."""
    indices: list[int]
    """The members' positions in the scopes asked for."""
    groups: list[tuple[str, ...]]
    """Each member's values of `by` (parallel to `indices`); `""` is a label the series lack."""

    def last_readers(self) -> list[bool]:
        """For each member, whether no later member reads its group (two keys may read one group:
        `m=a` and `m in (a)`)."""
        last = {group: position for position, group in enumerate(self.groups)}
        return [last[group] == position for position, group in enumerate(self.groups)]

    def matchers(self) -> list[str]:
        """Matchers keeping only the groups the batch asks about (each label to the values in use).

        They filter series by group labels only, so every group asked for keeps all its series.
        """
        return [
            Requirement(label, Operator.IN, tuple(sorted({group[i] for group in self.groups}))).to_promql()
            for i, label in enumerate(self.by)
        ]


class Slices:
    """A `ResultReader` of a batch's grouped answer: each series goes into its group's `Facts` as the
    answer is decoded, and is not kept. A series lacking a group label is in the group of `""`."""

    def __init__(self, by: tuple[str, ...]) -> None:
        self._by = by
        self._groups: dict[tuple[str, ...], Facts] = {}
        self._error: Exception | None = None

    def begin(self) -> None:
        self._groups = {}
        self._error = None

    def read(self, elements: list[Any]) -> None:
        if self._error is not None:
            return
        groups, by, absent = self._groups, self._by, itertools.repeat("")
        try:
            for labels, _, value in series(elements):
                group = tuple(map(labels.get, by, absent))
                facts = groups.get(group)
                if facts is None:
                    facts = groups[group] = Facts()
                facts.add(labels, value)
        except Exception as exc:  # raised by `check`: the answer's own verdict (decoded whole) comes first
            self._error = exc

    def check(self) -> None:
        """Raise what reading the series met first (a malformed
        element), once the answer is judged a vector."""
        if self._error is not None:
            raise self._error

    def sample(
        self,
        metric: MetricDef,
        group: tuple[str, ...],
        *,
        last: bool,
        evaluated_at: float,
        counted: bool,
        dated: bool,
    ) -> Sample | AdapterError:
        """The sample of a member reading `group` (no series: an empty group), or its error. The
        group's facts are dropped with its `last` reader, so a thousand are not freed in one block."""
        facts = self._groups.pop(group, _NO_SERIES) if last else self._groups.get(group, _NO_SERIES)
        try:
            return facts.sample(metric, evaluated_at=evaluated_at, counted=counted, dated=dated)
        except AdapterError as exc:
            return exc


#: the facts of a group without series (never added to)
_NO_SERIES = Facts()


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
