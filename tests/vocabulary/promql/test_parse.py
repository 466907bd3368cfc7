"""User PromQL through the real parser (adapter/vocabulary/promql/parse.py): selectors, types and errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.errors import PromQLSyntaxError
from adapter.vocabulary.catalogue import LABEL_MATCHERS
from adapter.vocabulary.promql.parse import ResultType, parse_template, raw_selectors, result_type
from adapter.vocabulary.promql.strings import promql_string


@pytest.mark.parametrize(
    ("query", "selectors"),
    [
        pytest.param('sum(x{a="b"})', ('x{a="b"}',), id="plain"),
        pytest.param("rate(x[5m] offset 1h)", ("x",), id="range selector without its offset"),
        pytest.param("x @ 1700000000 + y @ start()", ("x", "y"), id="at modifiers dropped"),
        pytest.param("max_over_time(sum(x)[10m:1m] offset 5m)", ("x",), id="inside a subquery"),
        pytest.param("x + on() group_left x", ("x",), id="each selector once"),
        pytest.param("a unless b", ("a", "b"), id="a filtering selector counts: it decided the value"),
        pytest.param('{__name__="x", a!~"b|c"}', ('{__name__="x", a!~"b|c"}',), id="name as a matcher"),
        pytest.param('{"my.metric", "a.b"="c"}', ('{__name__="my.metric", "a.b"="c"}',), id="UTF-8 names"),
        pytest.param('x{a="1" or b="2"}', ('x{a="1"}', 'x{b="2"}'), id="or of matcher sets, one each"),
        pytest.param("vector(1) * time()", (), id="no selector"),
    ],
)
def test_raw_selectors(query: str, selectors: tuple[str, ...]) -> None:
    """The vector selectors inside a query, rendered without modifiers, in order, each once."""
    assert raw_selectors(parse_template(query)) == selectors


def test_placeholder_is_filled_before_parsing() -> None:
    """`<<.LabelMatchers>>` takes the matchers; with none, a trailing comma is still PromQL."""
    template = 'sum(q{queue="a", <<.LabelMatchers>>})'
    assert raw_selectors(parse_template(template, ['namespace="prod"', 'model_name="x"'])) == (
        'q{queue="a", namespace="prod", model_name="x"}',
    )
    assert raw_selectors(parse_template(template)) == ('q{queue="a"}',)


@given(value=st.text(max_size=30).filter(lambda v: LABEL_MATCHERS not in v))
def test_rendered_values_are_escaped_again(value: str) -> None:
    """Whatever a label value holds, the rendered selector parses back to the same value: the parser's
    own rendering does not escape, this module's does. (Written into the template itself, the
    placeholder's text is the placeholder: a template is the operator's, and Hypothesis found that.)"""
    (rendered,) = raw_selectors(parse_template(f"x{{a={promql_string(value)}}}"))
    assert raw_selectors(parse_template(rendered)) == (rendered,)
    assert rendered == f"x{{a={promql_string(value)}}}"


def test_a_request_value_holding_the_placeholder_text_is_not_filled_again() -> None:
    """A request's matchers are put in once: a label value that reads `<<.LabelMatchers>>` stays that."""
    matcher = f"queue={promql_string(LABEL_MATCHERS)}"
    (rendered,) = raw_selectors(parse_template("q{<<.LabelMatchers>>}", [matcher, 'namespace="prod"']))
    assert rendered == f'q{{{matcher}, namespace="prod"}}'


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        ("sum(x)", ResultType.VECTOR),
        ("x", ResultType.VECTOR),
        ("scalar(sum(x))", ResultType.SCALAR),
        ("1 + 2", ResultType.SCALAR),
        ("-(3)", ResultType.SCALAR),
        ("x * 2", ResultType.VECTOR),
        ("x[5m]", ResultType.MATRIX),
        ("sum(x)[5m:]", ResultType.MATRIX),
        ('"text"', ResultType.STRING),
        ("time()", ResultType.SCALAR),
    ],
)
def test_result_type(query: str, kind: ResultType) -> None:
    """What a query evaluates to, as the query API's resultType names it."""
    assert result_type(parse_template(query)) is kind


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("sum(x", "unclosed left parenthesis"),
        ("sumx(x)", "unknown function with name 'sumx'"),
        ("{}", "vector selector must contain at least one non-empty matcher"),
    ],
)
def test_syntax_errors_carry_the_parser_message(query: str, message: str) -> None:
    """Text that is not PromQL is a `PromQLSyntaxError` with the parser's own words."""
    with pytest.raises(PromQLSyntaxError, match=message):
        parse_template(query)
