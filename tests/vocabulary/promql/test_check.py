"""The raw-counter check for user PromQL."""

from __future__ import annotations

import pytest

from adapter.vocabulary.promql.check import raw_cumulative_series


@pytest.mark.parametrize(
    ("query", "raw"),
    [
        pytest.param("sum(x_total)", ["x_total"], id="raw counter"),
        pytest.param("x_bucket", ["x_bucket"], id="bare bucket"),
        pytest.param("sum(rate(x_total[5m]))", [], id="rate makes it fine"),
        pytest.param("increase(x_count[1h]) / increase(x_sum[1h])", [], id="increase"),
        pytest.param("histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))", [], id="quantile of rate"),
        pytest.param(
            "histogram_quantile(0.9, sum by (le) (x_bucket))", ["x_bucket"], id="quantile of raw buckets"
        ),
        pytest.param("sum by (job_count) (up)", [], id="grouping label ending in _count is not a series"),
        pytest.param('up{job="a_total"}', [], id="string ending in _total is not a series"),
        pytest.param('sum(x{le_bucket="1"})', [], id="label name inside braces is not a series"),
        pytest.param("max_over_time(x_total[5m])", ["x_total"], id="over_time of a counter is still raw"),
        pytest.param("absent(x_total)", [], id="absent only checks existence"),
        pytest.param(
            "a_total / on (pod) group_left b_total", ["a_total", "b_total"], id="both sides of a join"
        ),
        pytest.param("rate(a_total[5m]) or b_count", ["b_count"], id="only the unwrapped side"),
        pytest.param("sqs_visible_messages", [], id="gauge"),
        pytest.param('{__name__="x_total"}', ["x_total"], id="name given as a matcher"),
        pytest.param("sum(x_total{<<.LabelMatchers>>})", ["x_total"], id="template with the placeholder"),
        pytest.param("rate(sum(x_total)[5m:])", [], id="rate of a subquery"),
        pytest.param("count(x_bucket)", [], id="count only looks at existence"),
    ],
)
def test_raw_cumulative_series(query: str, raw: list[str]) -> None:
    """Counters and histogram series must sit inside rate-like functions."""
    assert raw_cumulative_series(query) == raw


def test_a_query_that_is_not_promql_raises() -> None:
    """The check reads the query with the parser, so text that is not PromQL is an error, not a pass."""
    from adapter.errors import PromQLSyntaxError

    with pytest.raises(PromQLSyntaxError, match="unclosed left parenthesis"):
        raw_cumulative_series("sum(rate(x_total[5m])")
