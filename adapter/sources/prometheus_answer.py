"""Reading Prometheus' query API answers: a body becomes rows, rows of a combined query become a `Sample`.

Everything that is not a well-formed success answer (HTTP status other than 2xx, whatever the body;
`status: error`; HTML from a proxy; a JSON shape we do not know; a sample time that is not a number)
is `SourceUnavailable` with the precise cause. Values are reported as they came, NaN and infinities
included: the provider judges them (`adapter.provider`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Generator, Mapping
from typing import Any, Final, NamedTuple, TypeVar

from adapter.errors import NoTargets, SourceUnavailable
from adapter.sources import Gap, Sample
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.promql import PART_LABEL, REF_LABEL, Part

# An error body from a misconfigured proxy can be a whole HTML page; the log needs only its start.
_BODY_EXCERPT: Final = 200
#: Prometheus' default `--query.lookback-delta`: a selector with no sample this recent returns nothing,
#: so a value read only from such selectors is at least this old
LOOKBACK_SECONDS: Final = 300.0
# Elements of `data.result` decoded between two yields of `body_steps`: about 0.15 ms of work at
# three rows per key, where one `json.loads` of a thousand keys' answer is a block of 3 ms.
_ITEMS_PER_STEP: Final = 200
# What `json` counts as whitespace between tokens, and its scanner of one value (the one
# `json.loads` runs, so a value read here is the value `json.loads` would give).
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_scan_once: Final = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
T = TypeVar("T")
#: work done a part at a time: each `yield` is a point where the caller may let other work run
Steps = Generator[None, None, T]


class Row(NamedTuple):
    """One series of an instant vector: its labels, evaluation time and value."""

    labels: Mapping[str, str]
    evaluated: float
    value: float


def parse_body(status: int, body: bytes | bytearray) -> tuple[str, Any]:
    """`(resultType, result)` of a success answer; `SourceUnavailable` for anything else."""
    return finish(body_steps(status, body))


def finish(steps: Steps[T]) -> T:
    """Run `steps` to its end without pausing; its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def body_steps(status: int, body: bytes | bytearray) -> Steps[tuple[str, Any]]:
    """`parse_body` a part at a time: it yields after every `_ITEMS_PER_STEP` elements of
    `data.result`, so a large answer never holds the event loop in one block. The answer and every
    error are those of one `json.loads`: a body this reader does not walk (not an object, malformed
    anywhere) is decoded by `json.loads` after all, which raises what it raises."""
    try:
        text = body.decode(json.detect_encoding(body), "surrogatepass")  # as `json.loads` decodes bytes
        start = _skip(text, 0)
        if not text.startswith("{", start):
            raise _NotWalked
        document, end = yield from _walk(text, start, ())
        if _skip(text, end) != len(text):
            raise _NotWalked
    except (_NotWalked, ValueError):
        document = _loads(status, body)
    return _result(status, body, document)


class _NotWalked(Exception):
    """The body is not a JSON object this reader walks (`json.loads` decodes it instead)."""


def _skip(text: str, index: int) -> int:
    match = _WHITESPACE.match(text, index)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _scanned(text: str, index: int) -> tuple[Any, int]:
    """The JSON value at `index` and the index after it (`json`'s own scanner)."""
    try:
        value, end = _scan_once(text, index)
    except StopIteration as exc:
        raise _NotWalked from exc
    return value, end


def _walk(text: str, index: int, path: tuple[str, ...]) -> Steps[tuple[Any, int]]:
    """The value at `index` and the index after it. The objects on the way to `data.result` and that
    array are read a member or an element at a time; everything else by `json`'s scanner at once."""
    if path in ((), ("data",)) and text.startswith("{", index):
        return (yield from _object(text, index, path))
    if path == ("data", "result") and text.startswith("[", index):
        return (yield from _array(text, index))
    return _scanned(text, index)


def _object(text: str, index: int, path: tuple[str, ...]) -> Steps[tuple[dict[str, Any], int]]:
    members: dict[str, Any] = {}  # a repeated key keeps its last value, as in `json.loads`
    index = _skip(text, index + 1)
    if text.startswith("}", index):
        return members, index + 1
    while True:
        if not text.startswith('"', index):
            raise _NotWalked
        key, index = _scanned(text, index)
        index = _skip(text, index)
        if not text.startswith(":", index):
            raise _NotWalked
        members[key], index = yield from _walk(text, _skip(text, index + 1), (*path, key))
        index = _skip(text, index)
        if text.startswith("}", index):
            return members, index + 1
        if not text.startswith(",", index):
            raise _NotWalked
        index = _skip(text, index + 1)


def _array(text: str, index: int) -> Steps[tuple[list[Any], int]]:
    items: list[Any] = []
    index = _skip(text, index + 1)
    if text.startswith("]", index):
        return items, index + 1
    while True:
        item, index = _scanned(text, index)
        items.append(item)
        if len(items) % _ITEMS_PER_STEP == 0:
            yield
        index = _skip(text, index)
        if text.startswith("]", index):
            return items, index + 1
        if not text.startswith(",", index):
            raise _NotWalked
        index = _skip(text, index + 1)


def _loads(status: int, body: bytes | bytearray) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:
        raise SourceUnavailable(
            f"Prometheus answered HTTP {status} with non-JSON body {_excerpt(body)!r}"
        ) from exc


def _excerpt(body: bytes | bytearray) -> str:
    return bytes(body[:_BODY_EXCERPT]).decode("utf-8", "replace")


def _result(status: int, body: bytes | bytearray, document: Any) -> tuple[str, Any]:
    """`(resultType, result)` of a decoded answer; `SourceUnavailable` for anything but a success."""
    if not isinstance(document, dict):
        raise SourceUnavailable(f"Prometheus answered HTTP {status} with unexpected JSON {_excerpt(body)!r}")
    if document.get("status") != "success" or not 200 <= status < 300:
        # A success body under an error status is a proxy's or a broken backend's: never a value.
        raise SourceUnavailable(
            f"Prometheus answered HTTP {status} {document.get('errorType', 'status ' + repr(document.get('status')))}: "
            f"{str(document.get('error', _excerpt(body)))[:_BODY_EXCERPT]}"
        )
    data = document.get("data")
    if not isinstance(data, dict) or "resultType" not in data or "result" not in data:
        raise SourceUnavailable(
            f"Prometheus success answer without data.resultType/result: {_excerpt(body)!r}"
        )
    return str(data["resultType"]), data["result"]


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
    """The elements of an instant-vector answer, unread; `SourceUnavailable` for any other answer."""
    if result_type != "vector" or not isinstance(result, list):
        raise SourceUnavailable(f"expected an instant vector, got resultType {result_type!r}")
    return result


def vector_rows(result_type: str, result: Any) -> list[Row]:
    """The series of an instant-vector answer (or of a part of its elements)."""
    rows = []
    for item in vector_items(result_type, result):
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            raise SourceUnavailable(f"malformed vector element {item!r}")
        rows.append(Row(item["metric"], *_pair(item.get("value"))))
    return rows


def _target(labels: Mapping[str, str]) -> str | None:
    """`namespace/pod` when the series carry them, else the scrape `instance`, else unknown."""
    pod = labels.get("pod")
    if pod:
        namespace = labels.get("namespace")
        return f"{namespace}/{pod}" if namespace else pod
    return labels.get("instance") or None


def _oldest(stamps: list[float]) -> float:
    # `min` is order-dependent with NaN in the list; a NaN time must win, so the provider sees it.
    return math.nan if any(math.isnan(s) for s in stamps) else min(stamps)


def combined_sample(
    metric: MetricDef, rows: list[Row], *, evaluated_at: float, counted: bool, dated: bool
) -> Sample:
    """The facts in the answer to `promql.combined_query`.

    `counted`: the query has a count part (the metric has a presence query); without it the target
    count is unknown (`None`). `dated`: the query has timestamp parts. The sample time is the oldest
    raw-selector time; when no raw selector has a sample in Prometheus' lookback but a value came
    back (e.g. `max_over_time(x[1h])` over a dead exporter) every raw sample is older than the
    lookback, so the time is the evaluation time minus `LOOKBACK_SECONDS`, a lower bound of the age.
    """
    values: list[Row] = []
    counts: list[Row] = []
    stamps: list[float] = []
    gaps: list[Gap] = []
    for row in rows:
        part = row.labels.get(PART_LABEL, Part.VALUE)
        if part == Part.VALUE:
            values.append(row)
        elif part == Part.COUNT:
            counts.append(row)
        elif part == Part.TIMESTAMP:
            stamps.append(row.value)
        elif part in (Part.ABSENT, Part.NONFINITE):
            kind = "absent" if part == Part.ABSENT else "nan" if math.isnan(row.value) else "inf"
            gaps.append(Gap(row.labels.get(REF_LABEL, "?"), _target(row.labels), kind))
    if len(values) > 1:
        raise SourceUnavailable(
            f"query for {metric.name} returned {len(values)} value series; aggregate it to one, e.g. with sum()"
        )
    targets: int | None = None
    if counted:
        targets = int(counts[0].value) if counts and math.isfinite(counts[0].value) else 0
        if targets == 0:
            raise NoTargets(f"no series of {metric.name} match the namespace and selector")
    value = values[0].value if values else None
    if stamps:
        timestamp = _oldest(stamps)
    elif value is not None and dated:
        timestamp = evaluated_at - LOOKBACK_SECONDS
    else:
        timestamp = evaluated_at
    gaps.sort(key=lambda gap: (gap.family_name, gap.target or "", gap.kind))
    return Sample(value, timestamp, targets, tuple(gaps))
