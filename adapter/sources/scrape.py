"""The scrape source: the adapter reads the vLLM pods' `/metrics` itself (DESIGN.md §1).

`scrape_loop.PodScraper` discovers the targets and scrapes all of them every `interval` in the
background; `fetch` computes from what it holds with the PromQL arithmetic of `evaluation` and
`snapshots`, so it means what the Prometheus source means, and decides what failed pods mean.

Failure semantics per fetch, after scoping the pods to the namespace:

| situation                                              | answer                              |
|--------------------------------------------------------|-------------------------------------|
| no targets, or none with a matching series             | `NoTargets`                         |
| targets not scraped yet, or a rate with one scrape     | `SourceUnavailable` (warming up)    |
| discovery failed and there are no targets              | `SourceUnavailable`                 |
| every target that may hold the series failed           | `SourceUnavailable`                 |
| some failed, `on_partial: error`                       | `PartialFailure`                    |
| some failed, `on_partial: ignore-failed`               | the value over the pods that answered |

A failed pod whose last good scrape had no matching series (another model, say) is not counted.
Everything else is a raw fact for the provider to judge: values as computed (NaN and infinities
included), the oldest contributing scrape time, and the gauge families absent or non-finite on a
pod that answered (`Sample.gaps`). A gauge with `smoothing` is served as the mean of its values
over the rounds of the window (`adapter.sources.smoothing`, which says what a window holds).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import Config, ScrapeSettings
from adapter.errors import ConfigError, NoTargets, PartialFailure, SourceUnavailable
from adapter.sources import Sample
from adapter.sources.backlog import evaluate_backlog
from adapter.sources.discovery import Discovery, EndpointSliceDiscovery, StaticDiscovery
from adapter.sources.evaluation import evaluate, present
from adapter.sources.page_parser import histogram_samples
from adapter.sources.scrape_loop import PodScraper
from adapter.sources.smoothing import Smoother
from adapter.telemetry import Telemetry
from adapter.vocabulary.catalogue import GaugeSpec, HistogramSpec, MetricDef, PromQLSpec, presence_families
from adapter.vocabulary.disaggregated import PrefillBacklogSpec
from adapter.vocabulary.promql.catalogue import value_query
from adapter.vocabulary.promql.expressions import request_matchers
from adapter.vocabulary.selectors import Selector
from adapter.vocabulary.vllm import member_name

if TYPE_CHECKING:
    from adapter.kube import KubeClient  # the type only: static targets need no Kubernetes library

# A fetch that finds the newest round older than this fraction of the interval waits for the next
# one. The value cache refreshes each key once per interval on its own clock; unaligned, a served
# sample would be up to two intervals old (p99 ~1.9 s at 1 s). Aligned, fetches land just after a
# round and the served age stays near one interval. Rounds start on wall-clock ticks, so this also
# pulls every replica's refreshes to just after the same rounds: two replicas then hold different
# rounds only while their refresh phases differ, by at most this fraction of the interval (with
# 0.3, up to 20 % of simultaneous answers differed in tests/integration/test_scrape_replicas.py;
# with 0.1, under 5 %). The cost: a refresh drifting past it (a millisecond or so per interval)
# waits for the next round, about once in a hundred intervals.
_ALIGN_FRACTION: Final = 0.1
# Causes quoted in one error message; a fleet-wide outage would otherwise log hundreds.
_CAUSES_SHOWN: Final = 3


class ScrapeSource:
    """`Source` that scrapes vLLM pods directly."""

    name = "scrape"

    def __init__(
        self,
        settings: ScrapeSettings,
        metrics: Iterable[MetricDef] = (),
        *,
        discovery: Discovery,
        observe: Callable[[str, float], None] | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.discovery = discovery
        self._wall = wall
        self._monotonic = monotonic
        self._scraper = PodScraper(settings, discovery, observe=observe, wall=wall, monotonic=monotonic)
        self._known: set[GaugeSpec | HistogramSpec] = set()
        self._smoother = Smoother()
        for metric in metrics:
            self._want_metric(metric)

    @property
    def rounds(self) -> int:
        """Scrape rounds completed so far."""
        return self._scraper.rounds

    # --- the Source protocol -------------------------------------------------------------------

    async def start(self) -> None:
        await self._scraper.start()

    async def close(self) -> None:
        await self._scraper.close()

    async def ping(self) -> None:
        scraper = self._scraper
        await scraper.start()
        if scraper.rounds == 0:
            await scraper.await_round(fresh=False)
        if scraper.rounds == 0:
            raise SourceUnavailable("unable to scrape targets: no scrape round has completed yet")
        if scraper.discovery_error is not None and not scraper.pods:
            raise SourceUnavailable(scraper.discovery_error)

    def describe(self, metric: MetricDef, namespace: str | None, selector: Selector) -> str:
        where = f" in namespace {namespace!r}" if namespace is not None else ""
        matchers = request_matchers(metric, namespace, selector)
        targets = [t for t in self.discovery.targets() if namespace is None or t.namespace == namespace]
        spec = metric.spec
        smoothing = spec.smoothing_seconds if isinstance(spec, GaugeSpec) else 0.0
        if isinstance(spec, GaugeSpec) and smoothing:
            # Each round's value is the unsmoothed aggregate; the mean is taken over rounds.
            metric = metric.with_overrides(spec=dataclasses.replace(spec, smoothing_seconds=0.0))
        lines = [
            f"scrape:   {len(targets)} targets{where} every {self.settings.interval:g}s "
            f"(timeout {self.settings.timeout:g}s, on_partial {self.settings.on_partial})",
            f"computes: {value_query(metric, matchers)}",
        ]
        if smoothing:
            lines.append(f"smooths:  the mean of that value over the rounds of the last {smoothing:g}s")
        return "\n".join(lines)

    async def fetch(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        if not isinstance(metric.spec, GaugeSpec | HistogramSpec):
            raise SourceUnavailable(
                f"metric {metric.name!r} is user PromQL, which the scrape source cannot evaluate; "
                "use source 'prometheus'"
            )
        scraper = self._scraper
        await scraper.start()
        new_metric = self._want_metric(metric)
        new_namespace = self.discovery.want(namespace)
        if new_metric or new_namespace:
            scraper.wake(discover=new_namespace)
            await scraper.await_round(fresh=True)
        elif scraper.settled_rounds == 0 or (
            self._monotonic() - scraper.last_settled > _ALIGN_FRACTION * self.settings.interval
        ):
            await scraper.await_round(fresh=False, settled=True)
        sample = self._compute(metric, namespace, selector)
        spec = metric.spec
        if isinstance(spec, GaugeSpec) and spec.smoothing_seconds:
            # Only a round computed without error gets here: a failed one raised above, unrecorded.
            return self._smoother.smoothed((metric.name, namespace, selector), sample, spec.smoothing_seconds)
        return sample

    # --- computing a value ---------------------------------------------------------------------

    def _compute(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        where = f" in namespace {namespace!r}" if namespace is not None else ""
        pods = [
            p for p in self._scraper.pods.values() if namespace is None or p.target.namespace == namespace
        ]
        attempted = [p for p in pods if p.attempted]
        if not attempted:
            if pods:
                raise SourceUnavailable(
                    f"unable to compute {metric.name}: {len(pods)} targets{where} not scraped yet"
                )
            if self._scraper.discovery_error is not None:
                raise SourceUnavailable(f"unable to find targets{where}: {self._scraper.discovery_error}")
            raise NoTargets(f"no scrape targets{where} for {metric.name} among {self.discovery.scope}")
        answered = [p.snapshot() for p in attempted if p.error is None and p.page is not None]
        failed = [
            p
            for p in attempted
            if p.error is not None and (p.page is None or present(metric, [p.snapshot()], selector))
        ]
        matching = present(metric, answered, selector)
        if failed:
            causes = "; ".join(f"{p.target.url}: {p.error}" for p in failed[:_CAUSES_SHOWN])
            if len(failed) > _CAUSES_SHOWN:
                causes += f" (and {len(failed) - _CAUSES_SHOWN} more)"
            if not matching:
                raise SourceUnavailable(
                    f"unable to scrape any of the {len(failed)} targets of {metric.name}{where}: {causes}"
                )
            if self.settings.on_partial == "error":
                raise PartialFailure(
                    f"unable to scrape {len(failed)} of {len(failed) + len(matching)} targets of "
                    f"{metric.name}{where}: {causes}"
                )
        spec = metric.spec
        if isinstance(spec, PrefillBacklogSpec):
            sample = evaluate_backlog(metric, spec, matching, selector, self._wall())
        else:
            sample = evaluate(metric, matching, selector, self._wall())
        if sample is None:
            raise NoTargets(
                f"no series of {metric.name} match the selector {str(selector)!r} on the "
                f"{len(answered)} scraped targets{where}"
            )
        return sample

    def _want_metric(self, metric: MetricDef) -> bool:
        """Start parsing the families `metric` reads; return whether any is new."""
        spec = metric.spec
        if not isinstance(spec, GaugeSpec | HistogramSpec) or spec in self._known:
            return False
        self._known.add(spec)
        if isinstance(spec, GaugeSpec):
            families = presence_families(spec)  # the target families too: they decide presence
            new = self._scraper.want_gauges(member_name(m) for family in families for m in family)
            if isinstance(spec, PrefillBacklogSpec):  # a gauge and a histogram's window
                return self._want_histogram(spec.prompt) or new
            return new
        return self._want_histogram(spec)

    def _want_histogram(self, spec: HistogramSpec) -> bool:
        names = [sample for name in spec.family for sample in histogram_samples(name)]
        return self._scraper.want_cumulative(names, spec.span_seconds)


def make_scrape_source(
    config: Config, telemetry: Telemetry, kube: KubeClient | None = None, *, clock: Clock = SYSTEM_CLOCK
) -> ScrapeSource:
    """The scrape source a configuration describes: static targets, else EndpointSlices listed by
    `kube`; its rounds start on `clock`'s ticks."""
    settings = config.scrape
    discovery: Discovery
    if settings.targets:
        discovery = StaticDiscovery(settings.targets, settings.namespace, settings.path)
    elif kube is None:
        raise ConfigError(
            "scrape discovery (no 'scrape.targets') lists EndpointSlices through the Kubernetes client; "
            "none was given"
        )
    else:
        discovery = EndpointSliceDiscovery(settings, kube.list_endpoint_slices, kube.list_pods)

    def observe(outcome: str, seconds: float) -> None:
        telemetry.observe_upstream("scrape", outcome, seconds)

    metrics = [m for m in config.catalogue() if not isinstance(m.spec, PromQLSpec)]
    return ScrapeSource(
        settings, metrics, discovery=discovery, observe=observe, wall=clock.wall, monotonic=clock.monotonic
    )
