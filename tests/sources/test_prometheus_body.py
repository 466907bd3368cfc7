"""Reading a Prometheus answer a part at a time (`prometheus_body.body_steps`): the same answer and
the same errors as one `json.loads` of the body, with a yield every `_ITEMS_PER_STEP` elements."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.errors import AdapterError, SourceUnavailable
from adapter.sources.prometheus_body import (
    _ITEMS_PER_STEP,
    TAKEN,
    _excerpt,
    _loads,
    _result,
    body_steps,
    finish,
)

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_ELEMENT = st.fixed_dictionaries(
    {"metric": st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3), "value": _JSON}
)
_SUCCESS = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["success", "error"]),
        "data": st.fixed_dictionaries(
            {
                "resultType": st.sampled_from(["vector", "matrix"]),
                "result": st.lists(_ELEMENT | _JSON, max_size=6),
            },
            optional={"extra": _JSON},
        ),
    },
    optional={"warnings": _JSON, "errorType": st.text(max_size=6)},
)
_LAYOUT = st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")])


def _at_once(status: int, body: bytes) -> tuple[str, Any] | str:
    """The answer as one `json.loads` reads it (what `parse_body` did before it read in parts)."""
    try:
        return _result(status, body, _loads(status, body))
    except AdapterError as exc:
        return f"{type(exc).__name__}: {exc}"


def _in_steps(status: int, body: bytes) -> tuple[str, Any] | str:
    try:
        return finish(body_steps(status, body))
    except AdapterError as exc:
        return f"{type(exc).__name__}: {exc}"


class _Kept:
    """A `ResultReader` keeping every element it is handed (of the last array begun)."""

    def __init__(self) -> None:
        self.elements: list[Any] | None = None

    def begin(self) -> None:
        self.elements = []

    def read(self, elements: list[Any]) -> None:
        assert self.elements is not None
        self.elements.extend(elements)


def _read_in_steps(status: int, body: bytes) -> tuple[str, Any] | str:
    """The answer read in parts with a reader: its elements put back where `TAKEN` stands."""
    reader = _Kept()
    try:
        result_type, result = finish(body_steps(status, body, reader))
    except AdapterError as exc:
        return f"{type(exc).__name__}: {exc}"
    return result_type, reader.elements if result is TAKEN else result


def _same(a: object, b: object) -> bool:
    # NaN is not equal to itself; its JSON text is.
    return json.dumps(a) == json.dumps(b)


@settings(max_examples=300)
@given(document=_SUCCESS | _JSON, layout=_LAYOUT, status=st.sampled_from([200, 503]), cut=st.integers(0, 400))
def test_an_answer_read_in_parts_is_the_answer_json_loads_gives(
    document: Any, layout: tuple[str, str], status: int, cut: int
) -> None:
    """Any document, in any layout, whole or cut short (malformed), gives the same result or the same
    error read in parts as read at once."""
    body = json.dumps(document, separators=layout).encode()
    for text in (body, body[: min(cut, len(body))], b" \n" + body + b"\t", body + b" x"):
        assert _same(_in_steps(status, text), _at_once(status, text))
        assert _same(_read_in_steps(status, text), _at_once(status, text))


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            b'{"status":"success","data":{"result":[1],"result":[2],"resultType":"vector"}}',
            id="repeated key keeps the last",
        ),
        pytest.param(
            b'{"status":"success","data":{"result":[1],"result":2,"resultType":"vector"}}',
            id="repeated key, the last no array",
        ),
        pytest.param(
            b'{"status":"success","data":{"result":[1, 2] ,"resultType":"vector"}, "data": {}}',
            id="repeated data",
        ),
        pytest.param(
            b'\xef\xbb\xbf{"status":"success","data":{"resultType":"vector","result":[]}}',
            id="UTF-8 byte order mark",
        ),
        pytest.param(
            '{"status":"success","data":{"resultType":"vector","result":[]}}'.encode("utf-16"), id="UTF-16"
        ),
        pytest.param(
            b'{"status":"success","data":{"resultType":"vector","result":[NaN, Infinity]}}',
            id="NaN and Infinity literals",
        ),
        pytest.param(
            b'{"status":"success","data":{"resultType":"vector","result":[1,]}}', id="trailing comma"
        ),
        pytest.param(b"<html>bad gateway</html>", id="HTML"),
        pytest.param(b'["status"]', id="not an object"),
        pytest.param(b"\xff\xfe\xfd", id="not text"),
    ],
)
def test_edge_cases_read_in_parts_as_at_once(body: bytes) -> None:
    assert _same(_in_steps(200, body), _at_once(200, body))
    assert _same(_read_in_steps(200, body), _at_once(200, body))


def test_a_large_result_yields_between_parts() -> None:
    """A result of many elements is decoded a part at a time: one yield per `_ITEMS_PER_STEP` elements,
    so the source can let the event loop answer requests between them."""
    elements = [
        {"metric": {"namespace": f"ns{n}"}, "value": [1.0, str(n)]} for n in range(5 * _ITEMS_PER_STEP)
    ]
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": elements}}).encode()
    steps = body_steps(200, body)
    yields = 0
    answer: object = None
    while answer is None:
        try:
            next(steps)
            yields += 1
        except StopIteration as done:
            answer = done.value
    assert answer == ("vector", elements)
    assert yields == 5
    reader = _Kept()
    assert finish(body_steps(200, body, reader)) == ("vector", TAKEN)
    assert reader.elements == elements


def test_an_error_read_in_parts_keeps_its_message() -> None:
    body = b'{"status":"error","errorType":"bad_data","error":"parse error"}'
    with pytest.raises(SourceUnavailable, match="HTTP 400 bad_data: parse error"):
        finish(body_steps(400, body))
    assert _excerpt(body) == body.decode()
