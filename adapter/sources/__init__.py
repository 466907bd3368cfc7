"""The source protocol: where metric values come from.

A source answers one question: "what is this metric, for these pods, right now?" It returns a
`Sample` or raises an `adapter.errors.Unavailable` subclass. It never applies `on_empty`, `max_age`
or caching: those are the provider's, so every source has the same failure semantics.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from adapter.catalogue import MetricDef
from adapter.selectors import Selector


class Sample(NamedTuple):
    """What a source knows about a metric at one moment.

    `value` is `None` when the source is healthy and the targets exist but no series has data (for
    example no request finished in the window); NaN and infinities are reported as `None` too.
    `timestamp` is the Unix time of the underlying data (the oldest sample that contributed), not of
    the query.
    """

    value: float | None
    timestamp: float
    targets: int | None = None


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
