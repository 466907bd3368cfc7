"""User metrics in the `metrics:` section (adapter/config/user_metrics.py): parsed and scoped at start-up.

A user query that is not PromQL used to be accepted while `/readyz` said 200 and every request for it
failed; one without `<<.LabelMatchers>>` answered every namespace and selector with the same number
(issue 10). Both are now refused by the configuration loader, with the key path in the message.
"""

from __future__ import annotations

import pytest

from adapter.config import load
from adapter.errors import ConfigError
from adapter.vocabulary.catalogue import PromQLSpec


def user(text: str) -> PromQLSpec:
    metric = next(m for m in load(text).catalogue() if m.name == "q")
    assert isinstance(metric.spec, PromQLSpec)
    return metric.spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "metrics: {q: {query: 'sum(rate(x{<<.LabelMatchers>>}[5m])'}}",
            "config key 'metrics.q.query' value 'sum(rate(x{<<.LabelMatchers>>}[5m])' is not valid PromQL "
            "with <<.LabelMatchers>> as 'namespace=\"default\"': unclosed left parenthesis",
            id="unbalanced parenthesis",
        ),
        pytest.param(
            "metrics: {q: {query: 'sumx(x{<<.LabelMatchers>>})'}}",
            "unknown function with name 'sumx'",
            id="unknown function",
        ),
        pytest.param(
            "metrics: {q: {query: 'sum(x{<<.LabelMatchers>>})', presence: 'up{<<.LabelMatchers>>'}}",
            "config key 'metrics.q.presence' value 'up{<<.LabelMatchers>>' is not valid PromQL",
            id="presence query that does not parse",
        ),
        pytest.param(
            "metrics: {q: {query: 'sum({<<.LabelMatchers>>})', namespaced: false}}",
            "is not valid PromQL with <<.LabelMatchers>> as '': vector selector must contain at least one "
            "non-empty matcher",
            id="cluster-wide query that breaks without a selector",
        ),
        pytest.param(
            "metrics: {q: {query: 'x{<<.LabelMatchers>>}[5m]'}}",
            "config key 'metrics.q.query' value "
            "'x{<<.LabelMatchers>>}[5m]' evaluates to a matrix; it must be "
            "an instant vector or a scalar",
            id="range vector",
        ),
        pytest.param(
            "metrics: {q: {query: 'sum(x{<<.LabelMatchers>>})', presence: 'scalar(up{<<.LabelMatchers>>})'}}",
            "config key 'metrics.q.presence' value "
            "'scalar(up{<<.LabelMatchers>>})' evaluates to a scalar; it "
            "must be an instant vector",
            id="scalar presence",
        ),
        pytest.param(
            "metrics: {q: {query: 'sum(sqs_visible{queue=\"a\"})'}}",
            "config key 'metrics.q.query' value "
            "'sum(sqs_visible{queue=\"a\"})' has no <<.LabelMatchers>>, so "
            "it would answer every namespace and label selector with the same value; add it to the query's "
            "selectors, e.g. sum(queue_messages{<<.LabelMatchers>>}), or set 'metrics.q.namespaced' to false",
            id="unscoped query",
        ),
        pytest.param(
            "metrics: {q: {query: 'sum(sqs{<<.LabelMatchers>>})', presence: 'up{job=\"sqs\"}'}}",
            "config key 'metrics.q.presence' value 'up{job=\"sqs\"}' has no <<.LabelMatchers>>",
            id="unscoped presence",
        ),
        pytest.param(
            "metrics: {q: {query: 'sum(sqs)', namespaced: true}}",
            "config key 'metrics.q.query' value 'sum(sqs)' has no <<.LabelMatchers>>",
            id="explicitly namespaced without the placeholder",
        ),
    ],
)
def test_user_promql_refused_at_start_up(text: str, message: str) -> None:
    """A query that does not parse, has the wrong type or is not scoped: one line naming the key."""
    with pytest.raises(ConfigError) as caught:
        load(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            "metrics: {q: {query: 'max(sqs_visible)', namespaced: false}}", id="explicitly cluster-wide"
        ),
        pytest.param(
            "metrics: {q: {query: 'sum(sqs{queue=\"a\", <<.LabelMatchers>>})', namespaced: false}}",
            id="cluster-wide with a trailing comma when there is no selector",
        ),
        pytest.param("metrics: {q: {query: 'scalar(sum(sqs{<<.LabelMatchers>>}))'}}", id="scalar"),
        pytest.param(
            "metrics: {q: {query: 'sum(sqs{<<.LabelMatchers>>})', "
            "presence: 'up{job=\"sqs\", <<.LabelMatchers>>}'}}",
            id="scoped query and presence",
        ),
        pytest.param(
            "metrics: {q: {query: 'sum(rate(x_total{<<.LabelMatchers>>}[2m] offset 1m @ end()))'}}",
            id="modifiers",
        ),
    ],
)
def test_valid_user_promql_is_accepted(text: str) -> None:
    """Scoped or explicitly cluster-wide queries of an instant type load."""
    assert user(text).query


def test_cluster_wide_metric_is_marked_so() -> None:
    """`namespaced: false` is what makes a query without the placeholder acceptable, and it is kept."""
    metric = next(
        m for m in load("metrics: {q: {query: 'max(sqs)', namespaced: false}}").catalogue() if m.name == "q"
    )
    assert metric.namespaced is False
