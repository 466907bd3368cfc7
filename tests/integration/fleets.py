"""vLLM fleets as remote-write series: pods whose gauges, histograms, naming and sample age are chosen.

Used by the grouped-refresh property test (a random fleet per example) and by
bench/bench_grouped_refresh.py (a fleet of a thousand pods). Each pod writes three samples
`SPACING` apart ending `age` seconds before `now`, so a 2 m `rate()` sees two or three of them, a
pod older than the lookback (5 m) has no sample an instant query can see, and a pod between
`max_age` and the lookback is present but stale.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from adapter.vocabulary import vllm
from tests.integration.remote_write import Series

#: seconds between a pod's samples
SPACING = 30.0
# A few of the real bounds of each family (vllm-metrics.md §2.4), first and last included, so a
# quantile can land in the first bucket or past the last one as on a real pod.
_TTFT_BOUNDS = (0.001, 0.01, 0.1, 0.25, 1.0, 10.0, 2560.0)
_TPOT_BOUNDS = (0.01, 0.025, 0.05, 0.1, 0.5, 80.0)


@dataclass(frozen=True)
class Pod:
    """One vLLM pod. A gauge of `None` is absent from its page; NaN and infinities are written as they are."""

    namespace: str
    name: str
    model: str
    tier: str | None = None
    engines: int = 1
    old: bool = False
    """vLLM <= 0.10 names (`gpu_cache_usage_perc`, `time_per_output_token_seconds`)."""
    age: float = 0.0
    running: float | None = 3.0
    waiting: float | None = 1.0
    kv: float | None = 0.5
    traffic: float | None = 2.0
    """Requests per second into its histograms; 0 is an idle pod, `None` a pod without histograms."""
    tpot: float = 0.03
    ttft: float = 0.2


def _name(family: vllm.Family, old: bool) -> str:
    return family[-1] if old else family[0]


def _histogram(
    name: str,
    labels: dict[str, str],
    bounds: tuple[float, ...],
    observed: float,
    counts: list[float],
    times: list[float],
) -> Iterator[Series]:
    for bound in (*bounds, math.inf):
        le = "+Inf" if math.isinf(bound) else repr(bound)
        within = bound >= observed
        yield Series(
            {**labels, "__name__": f"{name}_bucket", "le": le},
            [(t, c if within else 0.0) for t, c in zip(times, counts, strict=True)],
        )
    yield Series({**labels, "__name__": f"{name}_count"}, list(zip(times, counts, strict=True)))
    yield Series(
        {**labels, "__name__": f"{name}_sum"}, [(t, c * observed) for t, c in zip(times, counts, strict=True)]
    )


def series(pod: Pod, now: float) -> Iterator[Series]:
    """Every series of `pod`, its newest sample `pod.age` seconds before `now`."""
    times = [now - pod.age - SPACING * k for k in (2, 1, 0)]
    for engine in range(pod.engines):
        labels = {
            "namespace": pod.namespace,
            "pod": pod.name,
            "instance": f"{pod.name}:8000",
            "job": "vllm",
            "model_name": pod.model,
            "engine": str(engine),
        }
        if pod.tier is not None:
            labels["tier"] = pod.tier
        gauges = (
            (vllm.NUM_REQUESTS_RUNNING, pod.running),
            (vllm.NUM_REQUESTS_WAITING, pod.waiting),
            (vllm.KV_CACHE_USAGE, pod.kv),
        )
        for family, value in gauges:
            if value is not None:
                yield Series({**labels, "__name__": _name(family, pod.old)}, [(t, value) for t in times])
        if pod.traffic is None:
            continue
        counts = [100.0 + pod.traffic * SPACING * k for k in range(3)]
        yield from _histogram(_name(vllm.TPOT, pod.old), labels, _TPOT_BOUNDS, pod.tpot, counts, times)
        yield from _histogram(_name(vllm.TTFT, pod.old), labels, _TTFT_BOUNDS, pod.ttft, counts, times)
