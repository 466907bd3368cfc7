"""User PromQL read with a real parser (`promql-parser`, the Rust parser of the Prometheus grammar).

A user's query is text the adapter did not write, so it is never taken apart with regular
expressions: `parse_template` fills in `<<.LabelMatchers>>` and parses it, `raw_selectors` lists the
vector selectors inside it (the raw series whose sample times date the value) and `result_type`
tells an instant vector from a scalar. Selectors are rendered again by this module with PromQL string
escaping, because the parser's own rendering does not escape label values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum
from typing import Final

import promql_parser

from adapter.errors import PromQLSyntaxError
from adapter.vocabulary.catalogue import LABEL_MATCHERS
from adapter.vocabulary.promql.strings import promql_string

Expr = promql_parser.Expr

_LABEL_NAME: Final = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_METRIC_NAME: Final = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
# The parser's enums are not hashable; they are looked up by member name.
_OPERATORS: Final = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}


class ResultType(Enum):
    """What an expression evaluates to, as the query API's `resultType` names it."""

    VECTOR = "vector"
    SCALAR = "scalar"
    MATRIX = "matrix"
    STRING = "string"


def fill(template: str, matchers: Sequence[str]) -> str:
    """The template with `<<.LabelMatchers>>` replaced by the matchers, comma-separated."""
    return template.replace(LABEL_MATCHERS, ", ".join(matchers))


def parse_template(template: str, matchers: Sequence[str] = ()) -> Expr:
    """Parse a PromQL template once its placeholder is filled; `PromQLSyntaxError` if it is not PromQL."""
    try:
        return promql_parser.parse(fill(template, matchers))
    except (ValueError, TypeError) as exc:
        raise PromQLSyntaxError(str(exc).strip() or exc.__class__.__name__) from exc


def _member(value: object) -> str:
    """`MatchOp.Equal` → `Equal`."""
    return str(value).rsplit(".", 1)[-1]


def _label(name: str) -> str:
    return name if _LABEL_NAME.match(name) else promql_string(name)


def _matcher(matcher: promql_parser.Matcher) -> str:
    return f"{_label(matcher.name)}{_OPERATORS[_member(matcher.op)]}{promql_string(matcher.value)}"


def render_selector(selector: promql_parser.VectorSelector) -> list[str]:
    """The selector as PromQL without its `offset` and `@` modifiers (one text per `or` alternative).

    Modifiers are dropped on purpose: freshness asks how old the newest sample of each raw series is
    now, not at the shifted instant the query read it.
    """
    name = selector.name
    groups = selector.matchers.or_matchers or [selector.matchers.matchers]
    texts = []
    for group in groups:
        matchers = [_matcher(m) for m in group]
        if name and not _METRIC_NAME.match(name):
            matchers.insert(0, f"__name__={promql_string(name)}")
            texts.append("{" + ", ".join(matchers) + "}")
        elif name:
            texts.append(f"{name}{{{', '.join(matchers)}}}" if matchers else name)
        else:
            texts.append("{" + ", ".join(matchers) + "}")
    return texts


def raw_selectors(expr: Expr) -> tuple[str, ...]:
    """Every vector selector inside `expr` (those of range selectors and subqueries too), rendered
    without modifiers, each once, in the order they appear."""
    found: dict[str, None] = {}

    def visit(node: Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            for text in render_selector(node):
                found.setdefault(text, None)

    promql_parser.walk(expr, visit)
    return tuple(found)


def result_type(expr: Expr) -> ResultType:
    """The type `expr` evaluates to (the parser has checked that the operands fit)."""
    if isinstance(expr, promql_parser.ParenExpr | promql_parser.UnaryExpr):
        return result_type(expr.expr)
    if isinstance(expr, promql_parser.NumberLiteral):
        return ResultType.SCALAR
    if isinstance(expr, promql_parser.StringLiteral):
        return ResultType.STRING
    if isinstance(expr, promql_parser.MatrixSelector | promql_parser.SubqueryExpr):
        return ResultType.MATRIX
    if isinstance(expr, promql_parser.Call):
        return ResultType(_member(expr.func.return_type).lower())
    if isinstance(expr, promql_parser.BinaryExpr):
        sides = (result_type(expr.lhs), result_type(expr.rhs))
        return ResultType.VECTOR if ResultType.VECTOR in sides else ResultType.SCALAR
    return ResultType.VECTOR  # vector selectors and aggregations


def cumulative_outside(expr: Expr, suffixes: tuple[str, ...], allowed: frozenset[str]) -> list[str]:
    """Names of selectors ending in one of `suffixes` that no function or aggregation in `allowed`
    encloses, in the order they appear (for the raw-counter check of `adapter.vocabulary.promql.check`)."""
    found: list[str] = []
    enclosing: list[str] = []

    def name_of(node: Expr) -> str | None:
        if isinstance(node, promql_parser.Call):
            return node.func.name
        if isinstance(node, promql_parser.AggregateExpr):
            return str(node.op).lower()
        return None

    def enter(node: Expr) -> None:
        name = name_of(node)
        if name is not None:
            enclosing.append(name)
        if isinstance(node, promql_parser.VectorSelector):
            metric = node.name or next((m.value for m in node.matchers.matchers if m.name == "__name__"), "")
            if metric.endswith(suffixes) and not allowed.intersection(enclosing):
                found.append(metric)

    def leave(node: Expr) -> None:
        if name_of(node) is not None:
            enclosing.pop()

    promql_parser.walk(expr, enter, leave)
    return found
