"""The source protocol: where metric values come from.

A source answers one question: "what is this metric, for these pods, right now?" It returns a
`Sample` of raw facts (value, oldest sample time, target count, gauge gaps) or raises an
`adapter.errors.Unavailable` subclass when it cannot answer at all. It never applies `on_empty`,
`max_age`, NaN/Inf or quantile rules, nor caching: those are the provider's, so every source has the
same failure semantics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from adapter.errors import AdapterError
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.selectors import Selector


class Gap(NamedTuple):
    """A gauge that a present target does not report as a number.

    vLLM creates its gauges at start-up, so an absent gauge family on a target that exposes the
    metric's other families, or a NaN/Inf gauge, is a broken or mismatched exporter: never "no
    traffic". Sources report gaps as facts; the provider turns them into a 503.
    """

    family_name: str
    """The family's preferred (newest) name, e.g. `vllm:num_requests_waiting`."""
    target: str | None
    """The pod (`namespace/pod`) or scrape URL, when the source can tell."""
    kind: str
    """`absent`, `nan` or `inf`."""

    def __str__(self) -> str:
        where = f" on {self.target}" if self.target else ""
        return f"{self.family_name} {'absent' if self.kind == 'absent' else 'is ' + self.kind.upper()}{where}"


class Sample(NamedTuple):
    """What a source knows about a metric at one moment: raw facts, not yet judged.

    `value` is the raw result: `None` when the targets exist but no series has data, and NaN or an
    infinity exactly as computed. `timestamp` is the Unix time of the *oldest* raw sample that
    contributed (not the query's evaluation time); it may be NaN or in the future when upstream
    says so. `gaps` lists gauge families absent or non-finite on present targets. The provider
    applies `max_age`, the clock-skew rule, `on_empty`, the gauge rule and the unresolved-quantile
    rule to these facts, once for every source.
    """

    value: float | None
    timestamp: float
    targets: int | None = None
    gaps: tuple[Gap, ...] = ()


class Source(Protocol):
    """A backend of metric values (Prometheus, or direct scraping of vLLM pods)."""

    name: str

    async def start(self) -> None:
        """Open connections and start background work; called once before the first fetch."""

    async def fetch(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        """Compute `metric` over the series in `namespace` (all when `None`) matching `selector`.

        Raises `SourceUnavailable` (unreachable, timeout, garbage), `NoTargets`, `PartialFailure`
        or `Unresolved`; never returns a made-up number, and never blocks past its own timeout.
        """
        ...

    async def ping(self) -> None:
        """Raise `SourceUnavailable` unless the source answers; used for readiness."""

    def describe(self, metric: MetricDef, namespace: str | None, selector: Selector) -> str:
        """A human-readable account of how `fetch` computes the metric (the PromQL, for Prometheus)."""
        ...

    async def close(self) -> None:
        """Release connections and stop background work; safe to call twice."""


class Scope(NamedTuple):
    """Where one key of a metric looks: its namespace (`None`: every namespace) and selector."""

    namespace: str | None
    selector: Selector


@runtime_checkable
class GroupedSource(Source, Protocol):
    """A source that answers many keys of one metric in fewer upstream round trips than keys.

    The provider refreshes a metric's live keys through `fetch_many` when its source offers it, and
    key by key through `fetch` otherwise (the scrape source computes from memory: no round trip).
    """

    async def fetch_many(self, metric: MetricDef, scopes: Sequence[Scope]) -> list[Sample | AdapterError]:
        """One outcome per scope, in order, each exactly what `fetch` would return or raise for it.

        Must not raise: a failure of a shared round trip is the outcome of every scope it served.
        """
        ...
