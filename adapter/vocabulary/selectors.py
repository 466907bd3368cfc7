"""Kubernetes label selectors: parsing, PromQL matchers and in-process matching.

The grammar is that of `k8s.io/apimachinery/pkg/labels.Parse`: comma-separated requirements of the
forms `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` and `!k`. `k>1` and `k<1` are valid
Kubernetes but have no meaning for metric labels, so they are rejected with a named error. Keys and
values are checked, and keys mapped to Prometheus label names, by `adapter.vocabulary.label_keys`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from adapter.errors import InvalidSelector
from adapter.vocabulary.label_keys import check_key, check_value, prometheus_label_name
from adapter.vocabulary.promql.strings import alternation, promql_string


class Operator(Enum):
    """A selector operator, named as in apimachinery's `selection.Operator`."""

    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"


@dataclass(frozen=True)
class Requirement:
    """One requirement of a selector; `values` is sorted and empty for (non-)existence."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies this requirement (Kubernetes semantics: `!=` and `notin`
        also match a label set without the key)."""
        present = self.key in labels
        value = labels.get(self.key, "")
        match self.operator:
            case Operator.EQUALS | Operator.IN:
                return present and value in self.values
            case Operator.NOT_EQUALS | Operator.NOT_IN:
                return not present or value not in self.values
            case Operator.EXISTS:
                return present
            case Operator.DOES_NOT_EXIST:
                return not present

    def to_promql(self) -> str:
        """Render as one PromQL label matcher. Values are escaped so they cannot leave their string."""
        name = prometheus_label_name(self.key)
        match self.operator:
            case Operator.EQUALS:
                return f"{name}={promql_string(self.values[0])}"
            case Operator.NOT_EQUALS:
                return f"{name}!={promql_string(self.values[0])}"
            case Operator.IN:
                return f"{name}=~{promql_string(alternation(self.values))}"
            case Operator.NOT_IN:
                return f"{name}!~{promql_string(alternation(self.values))}"
            case Operator.EXISTS:
                return f'{name}!=""'
            case Operator.DOES_NOT_EXIST:
                return f'{name}=""'

    def __str__(self) -> str:
        match self.operator:
            case Operator.EQUALS | Operator.NOT_EQUALS:
                return f"{self.key}{self.operator.value}{self.values[0]}"
            case Operator.IN | Operator.NOT_IN:
                return f"{self.key} {self.operator.value} ({','.join(self.values)})"
            case Operator.EXISTS:
                return self.key
            case Operator.DOES_NOT_EXIST:
                return f"!{self.key}"


@dataclass(frozen=True)
class Selector:
    """A parsed label selector: requirements in a canonical order, so equal selectors compare equal."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies every requirement."""
        return all(r.matches(labels) for r in self.requirements)

    def to_promql(self) -> list[str]:
        """PromQL label matchers, one per requirement."""
        return [r.to_promql() for r in self.requirements]

    @functools.cached_property
    def _hash(self) -> int:
        return hash(self.requirements)

    def __hash__(self) -> int:
        # A selector is part of every cache key, hashed on each request and each refresh of each key;
        # the generated hash would walk its requirements and their values every time.
        return self._hash

    def __getstate__(self) -> dict[str, object]:
        # A string's hash differs between processes: a copy elsewhere computes its own.
        return {name: value for name, value in self.__dict__.items() if name != "_hash"}

    @functools.cached_property
    def _pinned(self) -> dict[str, str]:
        return {
            r.key: r.values[0]
            for r in self.requirements
            if r.operator in (Operator.EQUALS, Operator.IN) and len(r.values) == 1
        }

    def equalities(self) -> dict[str, str]:
        """Keys pinned to a single value (`=`, `==`, or `in` with one value); a fresh copy each call."""
        return dict(self._pinned)

    @functools.cached_property
    def pins(self) -> tuple[tuple[str, str], ...] | None:
        """The selector as Prometheus labels each held to one value, sorted by label, or `None`.

        `k=v`, `k==v` and `k in (v)` hold `k` to `v`; `!k` holds it to the empty value, which is
        how PromQL reads a missing label (`k=""`). A selector that is exactly such a conjunction
        selects one group of a `by (labels)` aggregation, so a source may answer it from a grouped
        query. `!=`, `notin`, a set of several values and `k` (exists) select several groups, and
        two requirements on one Prometheus label (`a.b` and `a_b`) may contradict: all give `None`.
        """
        held: dict[str, str] = {}
        for r in self.requirements:
            if r.operator in (Operator.EQUALS, Operator.IN) and len(r.values) == 1:
                value = r.values[0]
            elif r.operator is Operator.DOES_NOT_EXIST:
                value = ""
            else:
                return None
            label = prometheus_label_name(r.key)
            if label in held:
                return None
            held[label] = value
        return tuple(sorted(held.items()))

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


class _Lexer:
    """Tokens of apimachinery's selector lexer: identifiers, operators, parentheses and commas."""

    _SPECIAL = "=!(),<>"

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self) -> str | None:
        saved = self.pos
        token = self.next()
        self.pos = saved
        return token

    def next(self) -> str | None:
        text = self.text
        while self.pos < len(text) and text[self.pos].isspace():
            self.pos += 1
        if self.pos >= len(text):
            return None
        start = self.pos
        ch = text[start]
        if ch in "(),":
            self.pos += 1
            return ch
        if ch in "=!<>":
            two = text[start : start + 2]
            if two in ("==", "!="):
                self.pos += 2
                return two
            self.pos += 1
            return ch
        while self.pos < len(text) and not text[self.pos].isspace() and text[self.pos] not in self._SPECIAL:
            self.pos += 1
        return text[start : self.pos]


def parse(text: str | None) -> Selector:
    """Parse a `labelSelector` query value; `None` or blank means "everything".

    Raises `InvalidSelector` naming the offending part of the selector. An HPA sends the same few
    selectors every sync, so parsed results are memoized (errors are not, and re-raise each time).
    """
    if text is None or not text.strip():
        return Selector()
    return _parse_cached(text)


@functools.lru_cache(maxsize=1024)
def _parse_cached(text: str) -> Selector:
    lexer = _Lexer(text)
    requirements: list[Requirement] = []
    while True:
        requirements.append(_parse_requirement(lexer))
        token = lexer.next()
        if token is None:
            break
        if token != ",":
            raise InvalidSelector(f"expected ',' between requirements, found {token!r}")
    ordered = sorted(set(requirements), key=lambda r: (r.key, r.operator.value, r.values))
    return Selector(tuple(ordered))


def _parse_requirement(lexer: _Lexer) -> Requirement:
    token = lexer.next()
    if token is None or token == ",":
        raise InvalidSelector("found an empty requirement; expected a label key")
    if token == "!":
        key = lexer.next()
        if key is None or key in "(),=!<>":
            raise InvalidSelector(f"expected a label key after '!', found {key!r}")
        check_key(key)
        return Requirement(key, Operator.DOES_NOT_EXIST)
    key = token
    if key in "()=!<>" or key in ("==", "!="):
        raise InvalidSelector(f"expected a label key, found {key!r}")
    check_key(key)
    op = lexer.peek()
    if op is None or op == ",":
        return Requirement(key, Operator.EXISTS)
    lexer.next()
    if op in (">", "<"):
        raise InvalidSelector(f"operator {op!r} in requirement on {key!r} is not supported for metrics")
    if op in ("=", "==", "!="):
        value = lexer.peek()
        if value is None or value in (",", ")", "("):
            value = ""
        else:
            lexer.next()
            if value in ("=", "==", "!=", "!", "<", ">"):
                raise InvalidSelector(f"expected a value for label {key!r}, found {value!r}")
        check_value(key, value)
        return Requirement(key, Operator.NOT_EQUALS if op == "!=" else Operator.EQUALS, (value,))
    if op in ("in", "notin"):
        values = _parse_set(lexer, key)
        return Requirement(key, Operator.IN if op == "in" else Operator.NOT_IN, values)
    raise InvalidSelector(f"unknown operator {op!r} after label {key!r}; valid: =, ==, !=, in, notin")


def _parse_set(lexer: _Lexer, key: str) -> tuple[str, ...]:
    if lexer.next() != "(":
        raise InvalidSelector(f"expected '(' after 'in'/'notin' for label {key!r}")
    values: set[str] = set()
    expect_value = True
    while True:
        token = lexer.next()
        if token is None:
            raise InvalidSelector(f"unterminated value set for label {key!r}; expected ')'")
        if token == ")":
            if expect_value and values:
                values.add("")  # `k in (a,)` holds an empty value, as in apimachinery
            break
        if token == ",":
            if expect_value:
                values.add("")
            expect_value = True
            continue
        if not expect_value:
            raise InvalidSelector(f"expected ',' or ')' in value set for label {key!r}, found {token!r}")
        if token in ("(", "=", "==", "!=", "!", "<", ">"):
            raise InvalidSelector(f"unexpected {token!r} in value set for label {key!r}")
        check_value(key, token)
        values.add(token)
        expect_value = False
    if not values:
        raise InvalidSelector(f"value set for label {key!r} must not be empty")
    return tuple(sorted(values))
