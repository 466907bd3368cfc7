"""Label selectors: Kubernetes grammar in, exactly escaped PromQL matchers out."""

from __future__ import annotations

import pickle
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.errors import InvalidSelector
from adapter.vocabulary.promql.strings import promql_string, regex_escape
from adapter.vocabulary.selectors import Operator, Requirement, parse


@pytest.mark.parametrize(
    ("text", "matchers"),
    [
        pytest.param("", [], id="empty selector selects everything"),
        pytest.param("model_name=llama", ['model_name="llama"'], id="equals"),
        pytest.param("model_name==llama", ['model_name="llama"'], id="double equals is equals"),
        pytest.param("model_name!=llama", ['model_name!="llama"'], id="not equals"),
        pytest.param(
            "tier in (gold,silver)", ['tier=~"gold|silver"'], id="in operator with two values renders regex"
        ),
        pytest.param("tier notin (bronze)", ['tier!~"bronze"'], id="notin renders negative regex"),
        pytest.param("canary", ['canary!=""'], id="exists"),
        pytest.param("!canary", ['canary=""'], id="does not exist"),
        pytest.param("a=", ['a=""'], id="empty value is allowed"),
        pytest.param(
            "app.kubernetes.io/name=vllm",
            ['app_kubernetes_io_name="vllm"'],
            id="dots and slash in key map to underscores",
        ),
        pytest.param("my-label=x", ['my_label="x"'], id="dash in key maps to underscore"),
        pytest.param("v in (1.5,2.0)", ['v=~"1\\\\.5|2\\\\.0"'], id="in values are regex-escaped"),
        pytest.param(
            "b=2, a=1 ,c in (y, x)",
            ['a="1"', 'b="2"', 'c=~"x|y"'],
            id="whitespace tolerated and order canonical",
        ),
        pytest.param(
            "x in (a,)", ['x=~"|a"'], id="trailing comma in set adds the empty value as apimachinery does"
        ),
    ],
)
def test_selector_renders_matchers(text: str, matchers: list[str]) -> None:
    """Each operator renders to the PromQL matcher with the same meaning."""
    assert parse(text).to_promql() == matchers


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("replicas>1", "'>'", id="greater-than rejected"),
        pytest.param("replicas<1", "'<'", id="less-than rejected"),
        pytest.param("a=b,", "empty requirement", id="trailing comma"),
        pytest.param(",a=b", "empty requirement", id="leading comma"),
        pytest.param("a in b", "expected '('", id="in without parentheses"),
        pytest.param("a in (b", "unterminated", id="unterminated set"),
        pytest.param("a in ()", "must not be empty", id="empty set"),
        pytest.param("a in (b c)", "expected ',' or ')'", id="missing comma in set"),
        pytest.param('a="b"', "value", id="quoted value is not a label value"),
        pytest.param('a=b"}or{x="', "value", id="hostile value trying to break out"),
        pytest.param("a=b\\", "value", id="backslash value"),
        pytest.param("a=" + "x" * 64, "63 characters", id="value too long"),
        pytest.param("-a=b", "label key", id="key must start alphanumeric"),
        pytest.param("Foo.Com/a=b", "DNS subdomain", id="uppercase prefix rejected"),
        pytest.param("/a=b", "DNS subdomain", id="empty prefix rejected"),
        pytest.param("1abc=x", "Prometheus label name", id="key mapping to invalid Prometheus name"),
        pytest.param("a=b c=d", "expected ','", id="missing comma between requirements"),
        pytest.param("a === b", "value", id="triple equals"),
        pytest.param("a ~ b", "unknown operator", id="unknown operator"),
        pytest.param("!", "label key after '!'", id="bang without key"),
    ],
)
def test_selector_errors_name_the_problem(text: str, fragment: str) -> None:
    """A malformed selector raises InvalidSelector whose message names the offending part."""
    with pytest.raises(InvalidSelector) as caught:
        parse(text)
    assert fragment in str(caught.value)
    assert caught.value.code == 400


def _decode_promql_string(literal: str) -> tuple[str, int]:
    """Decode a double-quoted PromQL string from the start of `literal`; return (value, end index)."""
    assert literal[0] == '"'
    simple = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
    out, i = [], 1
    while literal[i] != '"':
        if literal[i] == "\\":
            code = literal[i + 1]
            if code == "x":
                out.append(chr(int(literal[i + 2 : i + 4], 16)))
                i += 4
            else:
                out.append(simple[code])
                i += 2
        else:
            out.append(literal[i])
            i += 1
    return "".join(out), i + 1


@pytest.mark.parametrize(
    "value",
    [
        pytest.param('"} or vector(1) or {x="', id="closing quote and brace"),
        pytest.param("\\", id="lone backslash"),
        pytest.param('\\"', id="escaped quote attempt"),
        pytest.param("line\nbreak", id="newline"),
        pytest.param("\x00\x1f\x7f", id="control characters"),
        pytest.param("ünïcødé ✓", id="unicode"),
    ],
)
def test_promql_string_cannot_be_escaped(value: str) -> None:
    """A quoted value is exactly one PromQL string literal, and it decodes back to the value."""
    literal = promql_string(value)
    decoded, end = _decode_promql_string(literal)
    assert end == len(literal), "the string literal ended before the value did"
    assert decoded == value
    assert "\n" not in literal


def test_hostile_value_stays_inside_its_string_even_when_constructed_directly() -> None:
    """Defence in depth: a Requirement built without the parser still renders one matcher."""
    req = Requirement("model_name", Operator.EQUALS, ('x"} or vector(1) #',))
    assert req.to_promql() == 'model_name="x\\"} or vector(1) #"'


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        pytest.param("a.b", "a\\.b", id="dot"),
        pytest.param("a|b", "a\\|b", id="alternation"),
        pytest.param("(x)*+?", "\\(x\\)\\*\\+\\?", id="groups and quantifiers"),
        pytest.param("^[a]{2}$", "\\^\\[a\\]\\{2\\}\\$", id="anchors classes and counts"),
        pytest.param("plain-value_1", "plain-value_1", id="plain value untouched"),
    ],
)
def test_regex_escape(raw: str, escaped: str) -> None:
    """in/notin values match only themselves: RE2 metacharacters are escaped."""
    assert regex_escape(raw) == escaped
    assert re.fullmatch(escaped, raw)


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        pytest.param("a=1", {"a": "1"}, True, id="equals matches"),
        pytest.param("a=1", {}, False, id="equals needs the key"),
        pytest.param("a!=1", {}, True, id="not equals matches a missing key (Kubernetes semantics)"),
        pytest.param("a notin (1,2)", {"a": "2"}, False, id="notin excludes listed value"),
        pytest.param("a notin (1,2)", {}, True, id="notin matches a missing key"),
        pytest.param("a in (1,2)", {"a": "2"}, True, id="in matches listed value"),
        pytest.param("a", {"a": ""}, True, id="exists with empty value"),
        pytest.param("!a", {"a": "x"}, False, id="does not exist rejects present key"),
    ],
)
def test_matches_in_process(text: str, labels: dict[str, str], expected: bool) -> None:
    """The scrape source filters series with the same semantics the PromQL matchers have."""
    assert parse(text).matches(labels) is expected


def test_equal_selectors_compare_equal() -> None:
    """Order and duplicates do not create distinct cache keys."""
    assert parse("b=2,a=1") == parse("a=1, b=2,a=1")
    assert hash(parse("b=2,a=1")) == hash(parse("a=1,b=2"))


def test_equalities_feed_metric_labels() -> None:
    """Pinned keys become the item's metricLabels; ranges do not."""
    assert parse("model_name=llama,tier in (a),x!=y,z in (p,q)").equalities() == {
        "model_name": "llama",
        "tier": "a",
    }


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_any_selector_text_parses_or_fails_cleanly(text: str) -> None:
    """Whatever arrives in labelSelector, the parser answers a Selector or an InvalidSelector: no crash."""
    try:
        selector = parse(text)
    except InvalidSelector:
        return
    for matcher in selector.to_promql():
        # label name, operator, then exactly one string literal up to the end of the matcher
        found = re.match(r'^([a-zA-Z_][a-zA-Z0-9_]*)(=~|!~|!=|=)(".*")$', matcher, flags=re.DOTALL)
        assert found, matcher
        _value, end = _decode_promql_string(found.group(3))
        assert end == len(found.group(3))


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_any_value_stays_inside_its_string(value: str) -> None:
    """Any value, even one the parser would refuse, renders as exactly one string literal of itself."""
    for operator in (Operator.EQUALS, Operator.NOT_EQUALS):
        matcher = Requirement("model_name", operator, (value,)).to_promql()
        literal = matcher.split("=", 1)[1]
        decoded, end = _decode_promql_string(literal)
        assert end == len(literal)
        assert decoded == value


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1), min_size=1, max_size=4))
def test_any_set_matches_exactly_its_members(values: list[str]) -> None:
    """An `in` set renders a regex that fully matches each member and nothing that merely contains one."""
    requirement = Requirement("k", Operator.IN, tuple(sorted(set(values))))
    literal = requirement.to_promql().split("=~", 1)[1]
    pattern, _ = _decode_promql_string(literal)
    for value in values:
        assert re.fullmatch(pattern, value, flags=re.DOTALL)
    assert not re.fullmatch(pattern, values[0] + "\x00x", flags=re.DOTALL)


@pytest.mark.parametrize(
    ("text", "pins"),
    [
        pytest.param("", (), id="the empty selector holds no label"),
        pytest.param("model_name=llama", (("model_name", "llama"),), id="equality holds its label"),
        pytest.param("model_name==llama", (("model_name", "llama"),), id="double equals is equality"),
        pytest.param("model_name in (llama)", (("model_name", "llama"),), id="a set of one value holds it"),
        pytest.param("!tier", (("tier", ""),), id="absence holds the empty value, as PromQL reads it"),
        pytest.param("tier=", (("tier", ""),), id="an empty value is held like absence"),
        pytest.param(
            "tier=a,app.kubernetes.io/name=vllm",
            (("app_kubernetes_io_name", "vllm"), ("tier", "a")),
            id="keys become Prometheus label names, sorted",
        ),
        pytest.param("model_name!=llama", None, id="inequality selects several groups"),
        pytest.param("model_name in (a,b)", None, id="a set of several values selects several groups"),
        pytest.param("model_name notin (a)", None, id="notin selects several groups"),
        pytest.param("tier", None, id="existence selects several groups"),
        pytest.param("a.b=x,a_b=x", None, id="two keys on one Prometheus label may contradict"),
        pytest.param("model_name=a,tier!=b", None, id="one requirement that is not a pin spoils the rest"),
    ],
)
def test_pins_are_the_labels_held_to_one_value(text: str, pins: tuple[tuple[str, str], ...] | None) -> None:
    """`pins` is the group a selector selects, or None when it selects more than one group."""
    assert parse(text).pins == pins


def test_equal_selectors_hash_alike_and_a_copy_carries_no_hash() -> None:
    """A selector's hash is computed once (it is part of every cache key), equal selectors hash alike,
    and a pickled copy recomputes it: a string's hash differs between processes."""
    one, same = parse("tier in (a),model_name=llama"), parse("model_name=llama,tier in (a)")
    assert (one == same, hash(one) == hash(same)) == (True, True)
    assert "_hash" not in one.__getstate__()
    copy = pickle.loads(pickle.dumps(one))
    assert copy == one and hash(copy) == hash(one)
