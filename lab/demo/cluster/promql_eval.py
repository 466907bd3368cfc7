"""The part of PromQL the demo's stand-in for Prometheus evaluates (`lab.demo.cluster.pages`), on recorded
pages.

Number literals; selectors (each target's series carry an `instance` label, its URL); `rate()` and
`increase()` of a range selector (Prometheus' extrapolation, `adapter.sources.snapshots`); `sum`, `max`,
`min`, `avg`, `count` without grouping; `+ - * /` between numbers and vectors of at most one series each
(what an aggregation leaves); `clamp_max`, `clamp_min`, `scalar`. Anything else raises `Unsupported`
(a 503 that says what is missing), never a guess.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final

import promql_parser

from adapter.errors import SourceUnavailable
from adapter.sources.page_parser import Labels
from adapter.sources.snapshots import extrapolated_rate

#: one instant vector: (labels, value) per series
Vector = list[tuple[Labels, float]]
Value = Vector | float

_AGGREGATIONS: Final[dict[str, Callable[[list[float]], float]]] = {
    "sum": math.fsum,
    "max": max,
    "min": min,
    "avg": lambda values: math.fsum(values) / len(values),
    "count": lambda values: float(len(values)),
}
_OPERATORS: Final[dict[str, Callable[[float, float], float]]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b if b else (math.nan if a == 0 else math.copysign(math.inf, a)),
}
# Pages kept for rate(): a little longer than the longest window a demo query uses.
_RETENTION_SECONDS: Final = 120.0


class Unsupported(SourceUnavailable):
    """The query uses PromQL the demo's stand-in does not evaluate."""


def _member(value: object) -> str:
    """`MatchOp.Equal` → `Equal`, `TokenType` `sum` → `sum`."""
    return str(value).rsplit(".", 1)[-1]


def _matches(matcher: promql_parser.Matcher, labels: dict[str, str]) -> bool:
    value = labels.get(matcher.name, "")
    op = _member(matcher.op)
    if op == "Equal":
        return value == matcher.value
    if op == "NotEqual":
        return value != matcher.value
    # PromQL regular expressions are anchored at both ends.
    found = re.fullmatch(matcher.value, value) is not None
    return found if op == "Re" else not found


def _selected(selector: promql_parser.VectorSelector) -> tuple[str, list[promql_parser.Matcher]]:
    if (
        selector.offset is not None
        or selector.at is not None
        or selector.matchers.or_matchers
        or not selector.name
    ):
        raise Unsupported("the demo's PromQL stand-in reads named selectors without offset, @ or 'or'")
    return selector.name, list(selector.matchers.matchers)


def names(expr: promql_parser.Expr) -> set[str]:
    """The metric names a query reads."""
    found: set[str] = set()

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            found.add(node.name)

    promql_parser.walk(expr, visit)
    return found


class Scrapes:
    """Pages of each target, newest last, as (wall time, parsed page) for the last `_RETENTION_SECONDS`."""

    def __init__(self) -> None:
        self.pages: dict[str, deque[tuple[float, dict[str, dict[Labels, float]]]]] = {}

    def add(self, target: str, at: float, page: dict[str, dict[Labels, float]]) -> None:
        """Record one scrape, and forget pages too old to matter."""
        kept = self.pages.setdefault(target, deque())
        kept.append((at, page))
        while kept and kept[0][0] < at - _RETENTION_SECONDS:
            kept.popleft()

    def instant(self, name: str, matchers: list[promql_parser.Matcher], targets: Sequence[str]) -> Vector:
        """The latest value of every matching series of the targets, labelled with its `instance`."""
        vector: Vector = []
        for target in targets:
            kept = self.pages.get(target)
            if not kept:
                continue
            for labels, value in kept[-1][1].get(name, {}).items():
                full = (*labels, ("instance", target))
                if all(_matches(m, dict(full)) for m in matchers):
                    vector.append((tuple(sorted(full)), value))
        return vector

    def rate(
        self,
        name: str,
        matchers: list[promql_parser.Matcher],
        targets: Sequence[str],
        window: float,
        now: float,
        *,
        per_second: bool,
    ) -> Vector:
        """`rate()` (or `increase()`) of every matching series over `[now - window, now]`."""
        points: dict[Labels, list[tuple[float, float]]] = {}
        for target in targets:
            for at, page in self.pages.get(target, ()):
                if at < now - window:
                    continue
                for labels, value in page.get(name, {}).items():
                    full = tuple(sorted((*labels, ("instance", target))))
                    if all(_matches(m, dict(full)) for m in matchers):
                        points.setdefault(full, []).append((at, value))
        vector: Vector = []
        for labels, series in points.items():
            rate = extrapolated_rate(series, now - window, now)
            if rate is not None:
                vector.append((labels, rate if per_second else rate * window))
        return vector


class Evaluator:
    """Evaluates one query at `now` over `scrapes` of `targets`."""

    def __init__(self, scrapes: Scrapes, targets: Sequence[str], now: float) -> None:
        self.scrapes = scrapes
        self.targets = targets
        self.now = now

    def value(self, expr: promql_parser.Expr) -> Value:
        """The expression's value: a number, or an instant vector."""
        if isinstance(expr, promql_parser.ParenExpr):
            return self.value(expr.expr)
        if isinstance(expr, promql_parser.NumberLiteral):
            return float(expr.val)
        if isinstance(expr, promql_parser.UnaryExpr):
            return self._binary("*", -1.0, self.value(expr.expr))
        if isinstance(expr, promql_parser.VectorSelector):
            return self.scrapes.instant(*_selected(expr), self.targets)
        if isinstance(expr, promql_parser.AggregateExpr):
            return self._aggregate(expr)
        if isinstance(expr, promql_parser.BinaryExpr):
            if expr.modifier is not None:
                raise Unsupported("the demo's PromQL stand-in does not evaluate on/ignoring/group/bool")
            return self._binary(str(expr.op), self.value(expr.lhs), self.value(expr.rhs))
        if isinstance(expr, promql_parser.Call):
            return self._call(expr)
        raise Unsupported(f"the demo's PromQL stand-in does not evaluate {type(expr).__name__}")

    def _aggregate(self, expr: promql_parser.AggregateExpr) -> Vector:
        op = str(expr.op).lower()
        if op not in _AGGREGATIONS or expr.modifier is not None or expr.param is not None:
            raise Unsupported(
                f"the demo's PromQL stand-in aggregates with {'/'.join(_AGGREGATIONS)}, ungrouped"
            )
        inner = self.value(expr.expr)
        if not isinstance(inner, list):
            raise Unsupported("an aggregation needs an instant vector")
        return [((), _AGGREGATIONS[op]([v for _, v in inner]))] if inner else []

    def _call(self, expr: promql_parser.Call) -> Value:
        name, args = expr.func.name, list(expr.args)
        if name in ("rate", "increase"):
            (matrix,) = args
            if not isinstance(matrix, promql_parser.MatrixSelector):
                raise Unsupported(f"{name}() of anything but a range selector")
            selector, matchers = _selected(matrix.vector_selector)
            window = matrix.range.total_seconds()
            return self.scrapes.rate(
                selector, matchers, self.targets, window, self.now, per_second=name == "rate"
            )
        if name in ("clamp_max", "clamp_min"):
            vector, bound = (self.value(a) for a in args)
            if not isinstance(vector, list) or isinstance(bound, list):
                raise Unsupported(f"{name}() takes an instant vector and a number")
            pick = min if name == "clamp_max" else max
            # Go's math.Min/Max: a NaN bound (scalar() of an empty vector) makes every value NaN.
            return [
                (labels, math.nan if math.isnan(bound) else pick(value, bound)) for labels, value in vector
            ]
        if name == "scalar":
            (vector,) = (self.value(a) for a in args)
            if not isinstance(vector, list):
                raise Unsupported("scalar() takes an instant vector")
            return vector[0][1] if len(vector) == 1 else math.nan
        raise Unsupported(f"the demo's PromQL stand-in does not evaluate {name}()")

    def _binary(self, op: str, left: Value, right: Value) -> Value:
        apply = _OPERATORS.get(op)
        if apply is None:
            raise Unsupported(f"the demo's PromQL stand-in does not evaluate the operator {op!r}")
        if not isinstance(left, list) and not isinstance(right, list):
            return apply(left, right)
        if isinstance(left, list) and isinstance(right, list):
            if len(left) > 1 or len(right) > 1:
                raise Unsupported("vector arithmetic beyond one series a side; aggregate each side first")
            if not left or not right or left[0][0] != right[0][0]:
                return []
            return [(left[0][0], apply(left[0][1], right[0][1]))]
        if isinstance(left, list) and not isinstance(right, list):
            return [(labels, apply(value, right)) for labels, value in left]
        assert isinstance(right, list) and not isinstance(left, list)
        return [(labels, apply(left, value)) for labels, value in right]
