"""The PromQL the demo's stand-in evaluates (`lab.demo.cluster.promql_eval`), construct by construct, on
hand-written pages recorded at given wall times, so that `rate()` windows are exact."""

from __future__ import annotations

import math

import pytest

from adapter.sources.page_parser import Parser
from adapter.vocabulary.promql.parse import parse_template
from lab.demo.cluster.promql_eval import Evaluator, Scrapes, Unsupported, Value

PAGE_A = 'gw_total{cluster="c"} 100\nq{queue_name="x"} 3\nq{queue_name="y-dlq"} 1\n'
PAGE_B = 'gw_total{cluster="c"} 40\nq{queue_name="x"} 4\n'


def scrapes(*pages_at: tuple[float, str, str]) -> Scrapes:
    """(wall time, target, page text) → what PageSource would have recorded."""
    recorded = Scrapes()
    parser = Parser(["gw_total", "q"])
    for at, target, text in pages_at:
        recorded.add(target, at, parser.parse(text))
    return recorded


def evaluate(query: str, recorded: Scrapes, now: float, targets: tuple[str, ...] = ("a", "b")) -> Value:
    return Evaluator(recorded, list(targets), now).value(parse_template(query))


def only(value: Value) -> float:
    """The value of a one-series vector."""
    assert isinstance(value, list) and len(value) == 1
    return value[0][1]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("sum(q)", 8.0, id="sum over targets"),
        pytest.param('max(q{queue_name=~".*-dlq"})', 1.0, id="regex matcher, anchored"),
        pytest.param('count(q{queue_name!="x"})', 1.0, id="not-equal matcher"),
        pytest.param('sum(q{instance="b"})', 4.0, id="each target's series carry its instance"),
        pytest.param("sum(q) / 2 + 1", 5.0, id="arithmetic with numbers"),
        pytest.param("-sum(q)", -8.0, id="unary minus"),
        pytest.param("sum(q) - sum(q{queue_name='x'})", 1.0, id="one series a side"),
        pytest.param("clamp_max(sum(q), 5)", 5.0, id="clamp_max"),
        pytest.param("clamp_min(sum(q), 9)", 9.0, id="clamp_min"),
        pytest.param("clamp_max(sum(q), scalar(sum(q{queue_name='x'})))", 7.0, id="scalar of one series"),
    ],
)
def test_instant_queries(query: str, expected: float) -> None:
    recorded = scrapes((10.0, "a", PAGE_A), (10.0, "b", PAGE_B))
    value = evaluate(query, recorded, 10.0)
    assert value == expected or value == [((), expected)]


def test_rate_and_increase_follow_prometheus_over_the_window() -> None:
    """Counter samples 10 s apart: rate() is the increase over the window per second, extrapolated to the
    window's edges as Prometheus does; a counter reset is a restart, not a fall; one scrape is no rate."""
    recorded = scrapes(
        (0.0, "a", 'gw_total{cluster="c"} 100\n'),
        (10.0, "a", 'gw_total{cluster="c"} 150\n'),
        (20.0, "a", 'gw_total{cluster="c"} 200\n'),
        (20.0, "b", 'gw_total{cluster="c"} 5\n'),
    )
    rate = only(evaluate("sum(rate(gw_total[20s]))", recorded, 20.0, ("a",)))
    assert rate == pytest.approx(5.0)
    increase = only(evaluate("sum(increase(gw_total[20s]))", recorded, 20.0, ("a",)))
    assert increase == pytest.approx(100.0)
    assert evaluate("sum(rate(gw_total[20s]))", recorded, 20.0, ("b",)) == []
    restarted = scrapes(
        (0.0, "a", "gw_total 90\n"), (10.0, "a", "gw_total 10\n"), (20.0, "a", "gw_total 60\n")
    )
    after_reset = only(evaluate("sum(rate(gw_total[20s]))", restarted, 20.0, ("a",)))
    assert after_reset == pytest.approx(3.0)  # 10 after the restart, then 50, over 20 s


def test_an_empty_vector_stays_empty_and_scalar_of_it_is_nan() -> None:
    recorded = scrapes((10.0, "a", PAGE_A))
    assert evaluate("sum(nothing)", recorded, 10.0) == []
    value = only(evaluate("clamp_max(sum(q), scalar(sum(nothing)))", recorded, 10.0))
    assert math.isnan(value)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        pytest.param("sum by (queue_name) (q)", "ungrouped", id="grouping"),
        pytest.param("q > 1", "operator", id="a comparison"),
        pytest.param("q + q", "one series a side", id="vectors of several series"),
        pytest.param("sum(q) + on(x) sum(q)", "on/ignoring", id="vector matching"),
        pytest.param("histogram_quantile(0.9, q)", "histogram_quantile", id="another function"),
        pytest.param("sum(q offset 1m)", "offset", id="offset"),
        pytest.param("rate(q{x='1'}[1m:10s])", "range selector", id="a subquery"),
    ],
)
def test_what_it_does_not_evaluate_is_refused_never_guessed(query: str, message: str) -> None:
    with pytest.raises(Unsupported, match=message):
        evaluate(query, scrapes((10.0, "a", PAGE_A)), 10.0)
