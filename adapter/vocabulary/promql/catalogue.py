"""The catalogue rendered in the PromQL vocabulary (`adapter.vocabulary.promql.expressions`).

`value_query` is the one place a metric's PromQL is written: the Prometheus source sends it, the
recording rules group it by model, and the dashboards plot it with Grafana variables as matchers.
`served_query` is what the adapter serves of it, and `presence_query` says whether its targets exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from adapter.vocabulary.catalogue import (
    GaugeSpec,
    HistogramSpec,
    MetricDef,
    PromQLSpec,
    SaturationSpec,
    Statistic,
    presence_families,
)
from adapter.vocabulary.disaggregated import PrefillBacklogSpec
from adapter.vocabulary.promql.expressions import (
    PromQL,
    aggregate,
    duration,
    histogram_mean,
    histogram_quantile,
    number,
    rate,
    resolved,
    series,
)
from adapter.vocabulary.promql.parse import fill
from adapter.vocabulary.vllm import Family

#: the labels that identify a target; those a setup does not attach simply stay empty
TARGET_LABELS: Final = ("namespace", "pod", "instance")
#: the label that tells a saturation's terms apart until the per-pod `max` drops it
TERM_LABEL: Final = "adapter_term"


def gauge_series(spec: GaugeSpec, family: Family, matchers: Sequence[str] = ()) -> str:
    """`series` of one of the spec's gauge families, as its value reads it: each series' mean over
    the spec's smoothing window when it has one (`promql.expressions.smoothed`), else its latest sample."""
    window = duration(spec.smoothing_seconds) if spec.smoothing_seconds else ""
    return series(family, matchers, mean_over=window)


def rate_forecast(spec: HistogramSpec, matchers: Sequence[str] = (), by: Sequence[str] = ()) -> str:
    """`clamp_min(now + (now - before) x trend_factor, 0)` of the observation rate (`_count`): `now`
    over the last window, `before` over the window before it. While the earlier window has no data
    (a new fleet) the trend counts as 0 rather than leave the value empty, which would read as 0."""
    window = duration(spec.window_seconds)
    now = aggregate("sum", by, rate(spec.family, window, matchers, suffix="_count"))
    before = aggregate("sum", by, rate(spec.family, window, matchers, suffix="_count", offset=window))
    trend = f"(({now} - {before}) or ({now} * 0))"
    return f"clamp_min({now} + {trend} * {number(spec.trend_factor)}, 0)"


class Divisors(NamedTuple):
    """The PromQL expressions a saturation divides by: number literals from configuration, or a
    dashboard's variables (`$capacity`). `None` leaves that term out."""

    capacity: str
    kv_target: str | None = None
    queue_target: str | None = None

    @classmethod
    def of(cls, spec: SaturationSpec) -> Divisors:
        """The spec's own parameters as number literals."""
        return cls(
            number(spec.capacity),
            None if spec.kv_target is None else number(spec.kv_target),
            None if spec.queue_target is None else number(spec.queue_target),
        )


def saturation(
    spec: SaturationSpec, matchers: Sequence[str], by: Sequence[str] = (), divisors: Divisors | None = None
) -> str:
    """`avg(per-pod max(inflight / capacity, kv / kv_target, waiting / queue_target))` (`SaturationSpec`).

    A pod is a group of `TARGET_LABELS` (plus `by`, so a grouped answer keeps its groups): Prometheus'
    `instance` tells scrape targets apart even where no `pod` label is attached. Each term is labelled
    with `TERM_LABEL` so that `or` keeps all three of a pod before `max` picks the largest; a pod missing
    a family loses that term only (the gauge gaps make that a 503 anyway).
    """
    divisors = divisors or Divisors.of(spec)
    running, waiting = spec.families[0], spec.families[1]
    pod = tuple(dict.fromkeys((*TARGET_LABELS, *by)))
    waiting_per_pod = aggregate("sum", pod, gauge_series(spec, waiting, matchers))
    inflight = f"{aggregate('sum', pod, gauge_series(spec, running, matchers))} + {waiting_per_pod}"
    terms = [("inflight", f"({inflight}) / {divisors.capacity}")]
    if divisors.kv_target is not None:
        kv = aggregate("avg", pod, gauge_series(spec, spec.families[2], matchers))
        terms.append(("kv", f"{kv} / {divisors.kv_target}"))
    if divisors.queue_target is not None:
        terms.append(("queue", f"{waiting_per_pod} / {divisors.queue_target}"))
    if len(terms) == 1:
        per_pod = terms[0][1]
    else:
        labelled = (f'label_replace({expr}, "{TERM_LABEL}", "{name}", "", "")' for name, expr in terms)
        per_pod = aggregate("max", pod, " or ".join(labelled))
    return aggregate("avg", by, per_pod)


def prefill_backlog(spec: PrefillBacklogSpec, matchers: Sequence[str], by: Sequence[str] = ()) -> str:
    """`(queued == 0) or queued × mean prompt / (pods × throughput)` (`PrefillBacklogSpec`).

    An empty pool is 0 without asking the histogram; otherwise a window without a finished request
    makes the mean NaN (0/0) and a young pod's rate makes it empty: both leave no number. A pod is a
    group of `TARGET_LABELS` of the running gauge, as for `saturation`."""
    running, waiting = spec.families
    queued = (
        f"{aggregate('sum', by, gauge_series(spec, running, matchers))} + "
        f"{aggregate('sum', by, gauge_series(spec, waiting, matchers))}"
    )
    window = duration(spec.prompt.window_seconds)
    prompt = histogram_mean(spec.prompt.family, window, matchers, by)
    pod = tuple(dict.fromkeys((*TARGET_LABELS, *by)))
    pods = aggregate("count", by, aggregate("group", pod, series(running, matchers)))
    return f"(({queued}) == 0) or (({queued}) * ({prompt}) / ({pods} * {number(spec.throughput)}))"


def value_query(
    metric: MetricDef,
    matchers: Sequence[str],
    *,
    by: Sequence[str] = (),
    offset_seconds: float = 0.0,
    partial_groups: bool = True,
) -> PromQL:
    """The PromQL for the metric's value, for the given label matchers.

    Without `by` the result is a single series. With `by` (e.g. `("namespace", "model_name")`) it is one
    series per group, as recording rules need; a gauge summing several families then keeps a group that
    exposes only some of them, unless `partial_groups` is false: then a group has a value exactly when the
    ungrouped query over that group's series would (the adapter's grouped refresh). A user-defined
    `PromQLSpec` query is not regrouped: its grouping is its author's. `offset_seconds` evaluates a
    histogram's windows that long ago (a baseline); it raises `ValueError` for any other kind of metric rather
    than be silently ignored.
    """
    spec = metric.spec
    if offset_seconds and not isinstance(spec, HistogramSpec):
        raise ValueError(
            f"offset {offset_seconds:g}s must only be used with a histogram metric, not {metric.name!r}"
        )
    if isinstance(spec, PromQLSpec):
        return PromQL(fill(spec.query, matchers))
    if isinstance(spec, SaturationSpec):
        return PromQL(saturation(spec, matchers, by))
    if isinstance(spec, PrefillBacklogSpec):
        return PromQL(prefill_backlog(spec, matchers, by))
    if isinstance(spec, GaugeSpec):
        terms = [
            aggregate(spec.aggregation.value, by, gauge_series(spec, family, matchers))
            for family in spec.families
        ]
        if len(terms) == 1:
            return PromQL(terms[0])
        if by and partial_groups:
            # `a + b` between grouped vectors drops a group missing from either side; the `or` terms
            # bring such a group back with the families it has.
            return PromQL(" or ".join([f"({' + '.join(terms)})", *terms]))
        # Each family is aggregated on its own: `a + b` between vectors would silently drop pods
        # that expose only one of them; summing scalars of sums cannot.
        return PromQL(" + ".join(terms))
    window = duration(spec.window_seconds)
    offset = duration(offset_seconds) if offset_seconds else ""
    if spec.statistic is Statistic.FORECAST:
        if offset_seconds:
            raise ValueError(f"offset must not be used with the forecast {metric.name!r}")
        return PromQL(rate_forecast(spec, matchers, by))
    if spec.statistic is Statistic.MEAN:
        return PromQL(histogram_mean(spec.family, window, matchers, by, offset))
    return PromQL(histogram_quantile(spec.quantile, spec.family, window, matchers, by, offset))


def served_query(metric: MetricDef, matchers: Sequence[str], *, by: Sequence[str] = ()) -> PromQL:
    """`value_query` without the values the adapter refuses to serve (`catalogue.checked_value`): a
    quantile outside its resolved buckets is dropped, so a graph has a gap where the HPA gets a 503."""
    query = value_query(metric, matchers, by=by)
    spec = metric.spec
    if isinstance(spec, HistogramSpec) and spec.statistic is Statistic.QUANTILE:
        return PromQL(resolved(query, spec.buckets))
    return query


def presence_query(metric: MetricDef, matchers: Sequence[str]) -> PromQL | None:
    """A series selector whose series exist exactly when the metric's targets do, or `None`."""
    spec = metric.spec
    if isinstance(spec, PromQLSpec):
        if spec.presence is None:
            return None
        return PromQL(fill(spec.presence, matchers))
    families = presence_families(spec)
    return PromQL(" or ".join(f"({series(family, matchers)})" for family in families))
