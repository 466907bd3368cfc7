"""Catalogue metrics computed from the scraped pods, meaning what
`adapter.vocabulary.promql.catalogue.value_query` means.

Aggregation follows the PromQL the Prometheus source runs: each gauge family is aggregated on its
own and the results are summed; an alias contributes only the label sets the preferred name lacks
(PromQL `or`); a family without series makes the whole value empty; rates and quantiles use the
arithmetic of `adapter.sources.snapshots`. A saturation is computed per pod (one snapshot) and then
averaged, as `adapter.vocabulary.promql.catalogue.saturation` groups by pod.

Values are raw facts, as PromQL computes them: NaN and infinities stay what they are (0/0 is NaN),
and `None` means no series had data. For a gauge, each family absent on a present pod, or NaN or
infinite there, is reported as a `Gap` naming the pod: vLLM creates its gauges at start-up, so that
is a broken exporter, which the provider answers with 503 rather than `on_empty`. Nothing here
applies `on_empty`, `max_age` or the quantile rule; the provider does, for every source alike.

Deliberate differences from Prometheus: a series absent from a pod's latest scrape is dropped at
once (Prometheus keeps its older points in a range), and a failed or vanished pod contributes
nothing (the scrape source's `on_partial` policy decides what that means).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from adapter.errors import SourceUnavailable
from adapter.sources import Gap, Sample
from adapter.sources.page_parser import Labels, Page
from adapter.sources.snapshots import History, Window, bucket_quantile
from adapter.vocabulary.catalogue import (
    Aggregation,
    GaugeSpec,
    HistogramSpec,
    MetricDef,
    SaturationSpec,
    Statistic,
    presence_families,
)
from adapter.vocabulary.label_keys import prometheus_label_name
from adapter.vocabulary.selectors import Requirement, Selector
from adapter.vocabulary.vllm import family_name, split_member


@dataclass(frozen=True)
class Snapshot:
    """What evaluation needs to know about one pod: its labels and its latest successful scrape."""

    target_labels: Mapping[str, str]
    """Labels of the pod itself (`namespace`, `pod`, ...), which win over the exposition's own."""
    time: float
    page: Page
    history: History
    url: str | None = None
    """Where the pod was scraped; names it in a gap when its labels do not (a static target)."""

    @property
    def name(self) -> str | None:
        """`namespace/pod` when the pod's labels tell, else its URL (for messages)."""
        namespace, pod = self.target_labels.get("namespace"), self.target_labels.get("pod")
        return f"{namespace}/{pod}" if namespace and pod else self.url


class SeriesFilter:
    """A label selector applied to scraped series as Prometheus would apply its matchers.

    Keys are mapped to Prometheus label names first (`app.kubernetes.io/name` → `app_kubernetes_io_name`)
    so a selector means the same on both sources. A series' labels are its exposition labels
    overlaid with the pod's target labels (Prometheus' `honor_labels: false`).
    """

    def __init__(self, selector: Selector) -> None:
        self.requirements = tuple(replace(r, key=prometheus_label_name(r.key)) for r in selector.requirements)
        self._series: dict[tuple[tuple[Requirement, ...], Labels], bool] = {}

    def pod_requirements(self, target_labels: Mapping[str, str]) -> tuple[Requirement, ...] | None:
        """The requirements left to check per series, or `None` when the pod itself cannot match."""
        rest = []
        for requirement in self.requirements:
            if requirement.key in target_labels:
                if not requirement.matches(target_labels):
                    return None
            else:
                rest.append(requirement)
        return tuple(rest)

    def matches(self, requirements: tuple[Requirement, ...], labels: Labels) -> bool:
        """Whether exposition `labels` satisfy the per-series `requirements` (memoised: label sets
        repeat across pods)."""
        if not requirements:
            return True
        key = (requirements, labels)
        found = self._series.get(key)
        if found is None:
            mapping = dict(labels)
            found = self._series[key] = all(r.matches(mapping) for r in requirements)
        return found


def _aggregate(aggregation: Aggregation, values: list[float]) -> float | None:
    if not values:
        return None
    if aggregation is Aggregation.SUM:
        return sum(values)
    if aggregation is Aggregation.AVG:
        return sum(values) / len(values)
    numbers = [v for v in values if not math.isnan(v)]  # PromQL max() skips NaN unless all are
    return max(numbers) if numbers else math.nan


def present(metric: MetricDef, pods: Sequence[Snapshot], selector: Selector) -> list[Snapshot]:
    """The pods with a series proving they are the metric's targets (as `promql.catalogue.presence_query`:
    a gauge family's series, a histogram's `_count`)."""
    spec = metric.spec
    if not isinstance(spec, GaugeSpec | HistogramSpec):
        return []
    return _present(spec, pods, SeriesFilter(selector))


def _present(
    spec: GaugeSpec | HistogramSpec, pods: Sequence[Snapshot], filters: SeriesFilter
) -> list[Snapshot]:
    families = presence_families(spec)
    return [pod for pod in pods if any(_selected(pod, family, filters, pod.page) for family in families)]


def evaluate(metric: MetricDef, pods: Sequence[Snapshot], selector: Selector, now: float) -> Sample | None:
    """The metric over the pods' series matching `selector` (the caller scopes `pods` to the
    namespace), or `None` when no pod has a matching series. `targets` counts the pods with
    matching series; the timestamp is the oldest of their latest scrapes, not the window start;
    `gaps` lists a gauge's families absent or non-finite on those pods.

    Raises `SourceUnavailable` while no pod has the two scrapes a rate needs: a number it does not
    have is never made up."""
    spec = metric.spec
    if not isinstance(spec, GaugeSpec | HistogramSpec):
        raise SourceUnavailable(
            f"metric {metric.name!r} is user PromQL, which the scrape source cannot evaluate"
        )
    filters = SeriesFilter(selector)
    found = _present(spec, pods, filters)
    if not found:
        return None
    if isinstance(spec, SaturationSpec):
        return _saturation(spec, found, filters)
    if isinstance(spec, GaugeSpec):
        return _gauge(spec, found, filters)
    return _histogram(metric, spec, found, filters, now)


def _selected(
    pod: Snapshot, family: Sequence[str], filters: SeriesFilter, labels_of: Mapping[str, Iterable[Labels]]
) -> list[tuple[str, Labels]]:
    """(name, labels) of a family's matching series on one pod; an alias only fills label sets the
    preferred name lacks."""
    requirements = filters.pod_requirements(pod.target_labels)
    if requirements is None:
        return []
    seen: set[Labels] = set()
    chosen = []
    for member in family:
        name, fixed = split_member(member)
        for labels in labels_of.get(name, ()):
            key = labels
            if fixed:  # a breakdown stands for the plain names' label set without its fixed labels
                if not all(pair in labels for pair in fixed):
                    continue
                key = tuple(pair for pair in labels if pair not in fixed)
            if key not in seen and filters.matches(requirements, labels):
                seen.add(key)
                chosen.append((name, labels))
    return chosen


def _gauge(spec: GaugeSpec, present: Sequence[Snapshot], filters: SeriesFilter) -> Sample:
    per_family: list[list[float]] = [[] for _ in spec.families]
    gaps: list[Gap] = []
    for pod in present:
        for values, family in zip(per_family, spec.families, strict=True):
            chosen = [pod.page[name][labels] for name, labels in _selected(pod, family, filters, pod.page)]
            values.extend(chosen)
            if not spec.lazy:
                gaps.extend(_gaps(family_name(family), pod.name, chosen))
    totals = [_aggregate(spec.aggregation, values) for values in per_family]
    value = None if any(t is None for t in totals) else _sum(t for t in totals if t is not None)
    gaps.sort(key=lambda gap: (gap.family_name, gap.target or "", gap.kind))  # as the Prometheus source
    return Sample(value, min(p.time for p in present), len(present), tuple(gaps))


def _saturation(spec: SaturationSpec, present: Sequence[Snapshot], filters: SeriesFilter) -> Sample:
    """The mean over pods of each pod's largest term, as `promql.catalogue.saturation` computes it: a pod
    without a family loses the terms that need it, one with no term left drops out, and the gaps
    are those of a gauge over the same families."""
    per_pod: list[float] = []
    gaps: list[Gap] = []
    for pod in present:
        values = []
        for family in spec.families:
            chosen = [pod.page[name][labels] for name, labels in _selected(pod, family, filters, pod.page)]
            values.append(chosen)
            gaps.extend(_gaps(family_name(family), pod.name, chosen))
        running, waiting = values[0], values[1]
        terms = []
        if running and waiting:
            terms.append(_divide(_sum(running) + _sum(waiting), spec.capacity))
        kv = _aggregate(Aggregation.AVG, values[2]) if spec.kv_target is not None else None
        if kv is not None and spec.kv_target is not None:
            terms.append(_divide(kv, spec.kv_target))
        if spec.queue_target is not None and waiting:
            terms.append(_divide(_sum(waiting), spec.queue_target))
        largest = _aggregate(Aggregation.MAX, terms)  # NaN only when every term is (PromQL max)
        if largest is not None:
            per_pod.append(largest)
    gaps.sort(key=lambda gap: (gap.family_name, gap.target or "", gap.kind))
    return Sample(
        _aggregate(Aggregation.AVG, per_pod), min(p.time for p in present), len(present), tuple(gaps)
    )


def _gaps(family: str, target: str | None, values: Sequence[float]) -> Iterator[Gap]:
    """One pod's gaps in one gauge family: absent (the pod is a target through another family),
    NaN or infinite; each kind once per pod, however many engines share it."""
    if not values:
        yield Gap(family, target, "absent")
        return
    if any(math.isnan(v) for v in values):
        yield Gap(family, target, "nan")
    if any(math.isinf(v) for v in values):
        yield Gap(family, target, "inf")


def _histogram(
    metric: MetricDef, spec: HistogramSpec, present: Sequence[Snapshot], filters: SeriesFilter, now: float
) -> Sample:
    start = now - spec.window_seconds
    windows = [(pod, pod.history.window(start, now)) for pod in present]
    if spec.statistic is Statistic.FORECAST:
        earlier = [(pod, pod.history.window(start - spec.window_seconds, start)) for pod in present]
        return _forecast(metric, spec, present, filters, windows, earlier)
    if all(len(window.entries) < 2 for _, window in windows):
        raise SourceUnavailable(
            f"unable to compute {metric.name}: a rate needs two scrapes within its "
            f"{spec.window_seconds:g}s window and no target has them yet (warming up)"
        )
    timestamp = min(pod.time for pod in present)

    def rates(suffix: str) -> list[tuple[Labels, float]]:
        return _rates(spec, filters, windows, suffix)

    if spec.statistic is Statistic.MEAN:
        sums, counts = rates("_sum"), rates("_count")
        if not sums or not counts:
            return Sample(None, timestamp, len(present))
        total, observed = _sum(r for _, r in sums), _sum(r for _, r in counts)
        return Sample(_divide(total, observed), timestamp, len(present))
    buckets = []
    for labels, rate in rates("_bucket"):
        bound = dict(labels).get("le")
        if bound is not None:
            try:
                buckets.append((float(bound), rate))
            except ValueError:
                continue  # Prometheus ignores a bucket whose `le` is not a number
    # Raw, as histogram_quantile() answers: NaN without observations; the provider judges it.
    quantile = bucket_quantile(spec.quantile, buckets) if buckets else None
    return Sample(quantile, timestamp, len(present))


def _rates(
    spec: HistogramSpec, filters: SeriesFilter, windows: Sequence[tuple[Snapshot, Window]], suffix: str
) -> list[tuple[Labels, float]]:
    """`rate()` of every matching series of the family's `suffix` in each pod's window."""
    found: list[tuple[Labels, float]] = []
    for pod, window in windows:
        requirements = filters.pod_requirements(pod.target_labels)
        if requirements is None:
            continue
        seen: set[Labels] = set()
        for name in spec.family:
            for labels in window.labels(name + suffix):
                if labels in seen or not filters.matches(requirements, labels):
                    continue
                rate = window.rate((name + suffix, labels))
                if rate is not None:  # PromQL `or` falls back to an alias only where rate() is empty
                    seen.add(labels)
                    found.append((labels, rate))
    return found


def _forecast(
    metric: MetricDef,
    spec: HistogramSpec,
    present: Sequence[Snapshot],
    filters: SeriesFilter,
    windows: Sequence[tuple[Snapshot, Window]],
    earlier: Sequence[tuple[Snapshot, Window]],
) -> Sample:
    """`promql.catalogue.rate_forecast` over the scraped history: the trend is 0 while the earlier window has
    no rate, the value never negative."""
    if all(len(window.entries) < 2 for _, window in windows):
        raise SourceUnavailable(
            f"unable to compute {metric.name}: a rate needs two scrapes within its "
            f"{spec.window_seconds:g}s window and no target has them yet (warming up)"
        )
    timestamp = min(pod.time for pod in present)
    now = _rates(spec, filters, windows, "_count")
    if not now:
        return Sample(None, timestamp, len(present))
    current = _sum(r for _, r in now)
    before = _rates(spec, filters, earlier, "_count")
    trend = current - _sum(r for _, r in before) if before else 0.0
    return Sample(max(0.0, current + trend * spec.trend_factor), timestamp, len(present))


def _sum(values: Iterable[float]) -> float:
    """An exact sum of finite values; IEEE arithmetic once one is NaN or infinite (where
    `math.fsum` would raise for inf + -inf, PromQL answers NaN)."""
    numbers = list(values)
    return math.fsum(numbers) if all(math.isfinite(v) for v in numbers) else sum(numbers)


def _divide(dividend: float, divisor: float) -> float:
    """`dividend / divisor` as PromQL divides: x/0 is ±Inf, 0/0 is NaN."""
    if divisor:
        return dividend / divisor
    if dividend == 0 or math.isnan(dividend):
        return math.nan
    return math.copysign(math.inf, dividend) * math.copysign(1.0, divisor)
