"""Reading Prometheus' query API answers: elements become rows, rows of a combined query become a `Sample`.

A decoded body (`adapter.sources.prometheus_body`) gives the elements of `data.result`; a key's rows
are gathered into its `Facts` (a few numbers, not the rows), from which its `Sample` comes. Everything
that is not a well-formed instant vector (a JSON shape we do not know; a sample time that is not a
number) is `SourceUnavailable` with the precise cause. Values are reported as they came, NaN and
infinities included: the provider judges them (`adapter.provider`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, Final, NamedTuple

from adapter.errors import NoTargets, SourceUnavailable
from adapter.sources import Gap, Sample
from adapter.sources.prometheus_body import Taken
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.promql.combined import PART_LABEL, REF_LABEL, Part

#: Prometheus' default `--query.lookback-delta`: a selector with no sample this recent returns nothing,
#: so a value read only from such selectors is at least this old
LOOKBACK_SECONDS: Final = 300.0


class Row(NamedTuple):
    """One series of an instant vector: its labels, evaluation time and value."""

    labels: Mapping[str, str]
    evaluated: float
    value: float


def _pair(pair: Any) -> tuple[float, float]:
    """`[time, "value"]` → floats. The value may be NaN or infinite (a fact); the time must be a number."""
    # A JSON array is a list; the abstract `Sequence` check costs more than the rest of a row.
    if not isinstance(pair, list | tuple) or len(pair) != 2:
        raise SourceUnavailable(f"malformed sample {pair!r}; expected [timestamp, value]")
    try:
        evaluated, value = float(pair[0]), float(pair[1])
    except (TypeError, ValueError) as exc:
        raise SourceUnavailable(f"malformed sample {pair!r}; expected [timestamp, value]") from exc
    if not math.isfinite(evaluated):
        raise SourceUnavailable(f"malformed sample {pair!r}; its evaluation time is not a number")
    return evaluated, value


def vector_items(result_type: str, result: Any) -> list[Any]:
    """The elements of an instant-vector answer, unread (none when a `ResultReader` took them:
    `TAKEN`); `SourceUnavailable` for any other answer."""
    if result_type != "vector" or not isinstance(result, list | Taken):
        raise SourceUnavailable(f"expected an instant vector, got resultType {result_type!r}")
    return [] if isinstance(result, Taken) else result


def series(elements: list[Any]) -> Iterator[tuple[Mapping[str, str], float, float]]:
    """Each element's labels, evaluation time and value; `SourceUnavailable` at the first malformed one."""
    for item in elements:
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            raise SourceUnavailable(f"malformed vector element {item!r}")
        yield (item["metric"], *_pair(item.get("value")))


def vector_rows(result_type: str, result: Any) -> list[Row]:
    """The series of an instant-vector answer (or of a part of its elements)."""
    return [Row(*each) for each in series(vector_items(result_type, result))]


def _target(labels: Mapping[str, str]) -> str | None:
    """`namespace/pod` when the series carry them, else the scrape `instance`, else unknown."""
    pod = labels.get("pod")
    if pod:
        namespace = labels.get("namespace")
        return f"{namespace}/{pod}" if namespace else pod
    return labels.get("instance") or None


class Facts:
    """What the rows of one key's answer to `promql.combined.combined_query` say, gathered a row at a time.

    Only what the `Sample` is made of is kept (the first value and count, how many values, the oldest
    time, the gaps), not the rows: a grouped answer is read into a thousand of these as it is decoded.
    """

    __slots__ = ("_count", "_gaps", "_stamp", "_value", "_values")

    def __init__(self) -> None:
        self._values = 0
        self._value: float | None = None
        self._count: float | None = None
        self._stamp: float | None = None
        self._gaps: list[Gap] | None = None

    def add(self, labels: Mapping[str, str], value: float) -> None:
        """One row of the answer: its labels and value."""
        part = labels.get(PART_LABEL, Part.VALUE)
        if part == Part.VALUE:
            self._values += 1
            if self._values == 1:
                self._value = value
        elif part == Part.COUNT:
            if self._count is None:
                self._count = value
        elif part == Part.TIMESTAMP:
            stamp = self._stamp
            # The oldest time, but a NaN time wins wherever it comes, so the provider sees it.
            if stamp is None or value < stamp or (value != value and stamp == stamp):
                self._stamp = value
        elif part in (Part.ABSENT, Part.NONFINITE):
            kind = "absent" if part == Part.ABSENT else "nan" if math.isnan(value) else "inf"
            if self._gaps is None:
                self._gaps = []
            self._gaps.append(Gap(labels.get(REF_LABEL, "?"), _target(labels), kind))

    def sample(self, metric: MetricDef, *, evaluated_at: float, counted: bool, dated: bool) -> Sample:
        """The facts as a `Sample` (see `combined_sample`), or the error they make."""
        if self._values > 1:
            raise SourceUnavailable(
                f"query for {metric.name} returned {self._values} "
                "value series; aggregate it to one, e.g. with sum()"
            )
        targets: int | None = None
        if counted:
            count = self._count
            targets = int(count) if count is not None and math.isfinite(count) else 0
            if targets == 0:
                raise NoTargets(f"no series of {metric.name} match the namespace and selector")
        value = self._value
        if self._stamp is not None:
            timestamp = self._stamp
        elif value is not None and dated:
            timestamp = evaluated_at - LOOKBACK_SECONDS
        else:
            timestamp = evaluated_at
        gaps = sorted(self._gaps or (), key=lambda gap: (gap.family_name, gap.target or "", gap.kind))
        return Sample(value, timestamp, targets, tuple(gaps))


def combined_sample(
    metric: MetricDef, rows: list[Row], *, evaluated_at: float, counted: bool, dated: bool
) -> Sample:
    """The facts in the answer to `promql.combined.combined_query`.

    `counted`: the query has a count part (the metric has a presence query); without it the target
    count is unknown (`None`). `dated`: the query has timestamp parts. The sample time is the oldest
    raw-selector time; when no raw selector has a sample in Prometheus' lookback but a value came
    back (e.g. `max_over_time(x[1h])` over a dead exporter) every raw sample is older than the
    lookback, so the time is the evaluation time minus `LOOKBACK_SECONDS`, a lower bound of the age.
    """
    facts = Facts()
    for row in rows:
        facts.add(row.labels, row.value)
    return facts.sample(metric, evaluated_at=evaluated_at, counted=counted, dated=dated)
