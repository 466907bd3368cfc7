"""The body of a Prometheus query API answer, decoded a part at a time.

`body_steps` decodes a body as one `json.loads` would, with the same answer and the same errors, but
yields after every few elements of `data.result`, so a large answer never holds the event loop in one
block. A `ResultReader` may take those elements as they are decoded: a grouped answer is then read
into each key's facts (`adapter.sources.prometheus_groups.Slices`) and never lives whole in memory,
nor reaches the collector's older generations. A body that is not a success answer (HTTP status
other than 2xx, `status: error`, HTML from a proxy, a shape we do not know) is `SourceUnavailable`
with the precise cause.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from typing import Any, Final, Protocol, TypeVar

from adapter.errors import SourceUnavailable

# An error body from a misconfigured proxy can be a whole HTML page; the log needs only its start.
_BODY_EXCERPT: Final = 200
# Elements of `data.result` decoded (and read, with a `ResultReader`) between two yields of
# `body_steps`: about 0.15 ms of work at three rows per key, where one `json.loads` of a thousand keys'
# answer is a block of 3 ms. A request arriving meanwhile waits for at most one such part.
_ITEMS_PER_STEP: Final = 50
# What `json` counts as whitespace between tokens, and its scanner of one value (the one
# `json.loads` runs, so a value read here is the value `json.loads` would give).
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_BLANKS: Final = frozenset(" \t\n\r")
_scan_once: Final = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
T = TypeVar("T")
#: work done a part at a time: each `yield` is a point where the caller may let other work run
Steps = Generator[None, None, T]


class ResultReader(Protocol):
    """Takes the elements of an answer's `data.result` as `body_steps` decodes them."""

    def begin(self) -> None:
        """A `data.result` array begins: forget what an earlier one gave (of a repeated key,
        `json.loads` keeps the last value)."""
        ...

    def read(self, elements: list[Any]) -> None:
        """The next elements, in order; they are the reader's to keep or drop. Must not raise: an
        element it cannot read is reported after the whole answer is judged, as a reader of the
        decoded answer would have met it."""
        ...


class Taken:
    """The `data.result` of an answer whose elements a `ResultReader` took."""

    def __repr__(self) -> str:
        return "TAKEN"


#: what `body_steps` answers for `data.result` when a `ResultReader` took its elements
TAKEN: Final = Taken()


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


def body_steps(
    status: int, body: bytes | bytearray, reader: ResultReader | None = None
) -> Steps[tuple[str, Any]]:
    """`parse_body` a part at a time: it yields after every `_ITEMS_PER_STEP` elements of
    `data.result`, so a large answer never holds the event loop in one block. The answer and every
    error are those of one `json.loads`: a body this reader does not walk (not an object, malformed
    anywhere) is decoded by `json.loads` after all, which raises what it raises.

    With a `reader`, each part of a `data.result` array walked is handed to it before the yield and
    not kept, and that array is answered as `TAKEN`; a body decoded by `json.loads` keeps its list,
    which the caller then reads (the reader may have seen part of it: `begin` again first)."""
    try:
        text = body.decode(json.detect_encoding(body), "surrogatepass")  # as `json.loads` decodes bytes
        start = _skip(text, 0)
        if not text.startswith("{", start):
            raise _NotWalked
        document, end = yield from _walk(text, start, (), reader)
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


def _walk(
    text: str, index: int, path: tuple[str, ...], reader: ResultReader | None
) -> Steps[tuple[Any, int]]:
    """The value at `index` and the index after it. The objects on the way to `data.result` and that
    array are read a member or an element at a time; everything else by `json`'s scanner at once."""
    if path in ((), ("data",)) and text.startswith("{", index):
        return (yield from _object(text, index, path, reader))
    if path == ("data", "result") and text.startswith("[", index):
        if reader is None:
            return (yield from _array(text, index, None))
        reader.begin()
        _, end = yield from _array(text, index, reader)
        return TAKEN, end
    return _scanned(text, index)


def _object(
    text: str, index: int, path: tuple[str, ...], reader: ResultReader | None
) -> Steps[tuple[dict[str, Any], int]]:
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
        members[key], index = yield from _walk(text, _skip(text, index + 1), (*path, key), reader)
        index = _skip(text, index)
        if text.startswith("}", index):
            return members, index + 1
        if not text.startswith(",", index):
            raise _NotWalked
        index = _skip(text, index + 1)


def _array(text: str, index: int, reader: ResultReader | None) -> Steps[tuple[list[Any], int]]:
    """The array at `index` (its elements handed to `reader` a part at a time, if any: then the
    list answered holds none) and the index after it."""
    items: list[Any] = []
    index = _skip(text, index + 1)
    if text.startswith("]", index):
        return items, index + 1
    # The loop runs once per series of the answer: the common layout (no blanks, Prometheus' own)
    # is checked a character at a time before the general rule, and `_scanned` is inlined.
    scan, counted = _scan_once, 0
    while True:
        try:
            item, index = scan(text, index)
        except StopIteration as exc:
            raise _NotWalked from exc
        items.append(item)
        counted += 1
        if counted == _ITEMS_PER_STEP:
            counted = 0
            if reader is not None:
                reader.read(items)
                items = []
            yield
        char = text[index : index + 1]
        if char == ",":
            index += 1
            if text[index : index + 1] in _BLANKS:
                index = _skip(text, index)
            continue
        if char != "]":
            index = _skip(text, index)
            if not text.startswith("]", index):
                if not text.startswith(",", index):
                    raise _NotWalked
                index = _skip(text, index + 1)
                continue
        if reader is not None and items:
            reader.read(items)
            items = []
        return items, index + 1


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
            f"Prometheus answered HTTP {status} "
            f"{document.get('errorType', 'status ' + repr(document.get('status')))}: "
            f"{str(document.get('error', _excerpt(body)))[:_BODY_EXCERPT]}"
        )
    data = document.get("data")
    if not isinstance(data, dict) or "resultType" not in data or "result" not in data:
        raise SourceUnavailable(
            f"Prometheus success answer without data.resultType/result: {_excerpt(body)!r}"
        )
    return str(data["resultType"]), data["result"]
