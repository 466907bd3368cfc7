"""`vllm_prefill_backlog_seconds` over the scraped pods: the arithmetic of `promql.catalogue.prefill_backlog`.

The backlog combines a gauge (the requests the pool holds) and a histogram mean (the prompt tokens a
request computed over the window); each is evaluated as the catalogue's own metric over the same
pods (`evaluation.evaluate`), so their rules hold here too: a gauge absent or NaN on a pod is a gap,
a rate needs two scrapes in its window. An empty pool is 0 without the histogram; a pool holding
requests with no request finished in the window has no value (`None`), never a guess.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from adapter.sources import Sample
from adapter.sources.evaluation import Snapshot, evaluate
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.disaggregated import PrefillBacklogSpec
from adapter.vocabulary.selectors import Selector


def evaluate_backlog(
    metric: MetricDef, spec: PrefillBacklogSpec, pods: Sequence[Snapshot], selector: Selector, now: float
) -> Sample | None:
    """The backlog in seconds over the pods matching `selector`, or `None` without matching pods.

    Raises what `evaluate` raises for the prompt histogram (`SourceUnavailable` while no pod has two
    scrapes in its window), only when the pool holds requests."""
    queued = evaluate(metric.with_overrides(spec=spec.queued), pods, selector, now)
    if queued is None or queued.gaps or queued.value is None or not math.isfinite(queued.value):
        return queued  # the provider answers gaps and non-finite gauges as a gauge's (503)
    if queued.value == 0:
        return Sample(0.0, queued.timestamp, queued.targets)
    prompt = evaluate(metric.with_overrides(spec=spec.prompt), pods, selector, now)
    if prompt is None or prompt.value is None:
        return Sample(None, queued.timestamp, queued.targets)
    assert queued.targets  # present pods made the value
    value = queued.value * prompt.value / (queued.targets * spec.throughput)
    return Sample(value, min(queued.timestamp, prompt.timestamp), queued.targets)
