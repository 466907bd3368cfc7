"""What every dashboard query shares: the query type, Grafana's variables as matchers, legends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from adapter.vocabulary import vllm
from adapter.vocabulary.exporters import HPA_LABEL
from adapter.vocabulary.promql.expressions import PromQL, selector


class Query(NamedTuple):
    """One panel query: the PromQL, its legend, and how Grafana runs it."""

    expr: PromQL
    legend: str = ""
    #: evaluate once at the end of the range (tables, label lists) instead of over the range
    instant: bool = False
    #: return labels as columns (table panels)
    table: bool = False


def query(expr: str, legend: str = "", *, instant: bool = False, table: bool = False) -> Query:
    """A `Query` of an expression built with `adapter.vocabulary.promql`."""
    return Query(PromQL(expr), legend, instant, table)


#: Grafana's own rate window: at least four scrape intervals, whatever the zoom
RATE: Final = "$__rate_interval"

# Grafana variables as matchers.
NAMESPACE: Final = 'namespace=~"$namespace"'
MODEL: Final = f'{vllm.MODEL_LABEL}=~"$model"'
POD: Final = 'pod=~"$pod"'
HPA: Final = f'{HPA_LABEL}=~"$hpa"'
QUEUE: Final = 'queue_name=~"$queue"'
ADAPTER_METRIC: Final = 'metric=~"$metric"'

M: Final = vllm.MODEL_LABEL
BY_MODEL: Final = (M,)
BY_POD: Final = ("namespace", "pod")


def legend(labels: Sequence[str], suffix: str = "") -> str:
    """`{{model_name}} suffix`: the group labels (namespace left out: the variable says it) and a word."""
    text = " ".join("{{" + label + "}}" for label in labels if label != "namespace")
    return f"{text} {suffix}".strip()


def label_values(name: str, label: str, matchers: Sequence[str] = ()) -> Query:
    """Grafana's `label_values(series, label)` variable query."""
    return query(f"label_values({selector(name, matchers)}, {label})")
