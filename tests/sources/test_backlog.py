"""`vllm_prefill_backlog_seconds` over scraped pods (adapter/sources/backlog.py) and role labels of targets.

Two prefill pods and a decode pod, with histories that begin exactly at the window's start (no
extrapolation), so the mean prompt is Δsum / Δcount exactly; the provider's answers for what the
arithmetic cannot know (no prompt size, a gap) are asserted through `CachedProvider.resolve`.
"""

from __future__ import annotations

import math

import pytest

from adapter.cache import ValueCache
from adapter.errors import EmptyResult, GaugeGap
from adapter.provider import CachedProvider
from adapter.sources.backlog import evaluate_backlog
from adapter.sources.discovery import static_target
from adapter.sources.evaluation import Snapshot
from adapter.sources.page_parser import Page
from adapter.sources.snapshots import History
from adapter.telemetry import Telemetry
from adapter.vocabulary import vllm
from adapter.vocabulary.disaggregated import PrefillBacklogSpec, prefill_backlog
from adapter.vocabulary.roles import Role, bind
from adapter.vocabulary.selectors import parse
from tests.fakes import FakeSource, HandClock

T0 = 1_800_000_000.0
WINDOW = 120.0
METRIC = prefill_backlog(1000.0, WINDOW)
SPEC = PrefillBacklogSpec.of(1000.0, WINDOW)
assert METRIC.spec == SPEC
LABELS = (("engine", "0"), ("model_name", "llama"))
HISTOGRAM = vllm.PREFILL_COMPUTED_TOKENS[0]
SELECTOR = bind(parse("model_name=llama"), Role("prefill"), METRIC.name)


def pod(
    name: str, role: str, running: float | None, waiting: float, counts: list[tuple[float, float]]
) -> Snapshot:
    """A pod whose prompt histogram had (count, sum) at T0 - 120, T0 - 60 and T0."""
    gauges: Page = {
        vllm.NUM_REQUESTS_WAITING[0]: {LABELS: waiting},
        vllm.KV_CACHE_USAGE[0]: {LABELS: 0.5},
    }
    if running is not None:
        gauges[vllm.NUM_REQUESTS_RUNNING[0]] = {LABELS: running}
    # The latest page holds the histogram too (its `_count` proves the pod reports it).
    gauges[f"{HISTOGRAM}_count"], gauges[f"{HISTOGRAM}_sum"] = (
        {LABELS: counts[-1][0]},
        {LABELS: counts[-1][1]},
    )
    history = History(WINDOW * 2)
    for offset, (count, total) in zip((-WINDOW, -WINDOW / 2, 0.0), counts, strict=True):
        history.add(
            T0 + offset,
            {f"{HISTOGRAM}_count": {LABELS: count}, f"{HISTOGRAM}_sum": {LABELS: total}},
            [f"{HISTOGRAM}_count", f"{HISTOGRAM}_sum"],
        )
    target = {"namespace": "prod", "pod": name, "llm_d_ai_role": role}
    return Snapshot(target, T0, gauges, history)


# prefill-a computed 200 tokens per request over the window (10 requests), prefill-b 100 (10): mean 150
FLEET = [
    pod("prefill-a", "prefill", 2, 3, [(10, 1000), (15, 2000), (20, 3000)]),
    pod("prefill-b", "prefill", 1, 0, [(0, 0), (5, 500), (10, 1000)]),
    pod("decode-a", "decode", 30, 9, [(0, 0), (50, 5000), (90, 90000)]),
]


def test_the_backlog_is_the_requests_held_times_the_mean_prompt_over_the_pools_throughput() -> None:
    sample = evaluate_backlog(METRIC, SPEC, FLEET, SELECTOR, T0)
    assert sample is not None
    # (2 + 3 + 1 + 0) requests x 150 tokens / (1000 tokens/s x 2 pods); the decode pod is not read
    assert sample.value == pytest.approx(6 * 150 / 2000)
    assert (sample.targets, sample.timestamp, sample.gaps) == (2, T0, ())


def test_an_empty_pool_is_zero_without_a_prompt_size() -> None:
    idle = [pod("prefill-a", "prefill", 0, 0, [(0, 0), (0, 0), (0, 0)])]
    sample = evaluate_backlog(METRIC, SPEC, idle, SELECTOR, T0)
    assert sample is not None and sample.value == 0.0


def provider() -> CachedProvider:
    clock = HandClock()
    clock.now = T0
    return CachedProvider(
        (METRIC,),
        FakeSource(),
        ValueCache(5.0, 300.0),
        default_max_age=90.0,
        telemetry=Telemetry(),
        wall=clock,
    )


def test_requests_held_while_none_finished_in_the_window_have_no_value() -> None:
    stalled = [pod("prefill-a", "prefill", 1, 4, [(10, 1000), (10, 1000), (10, 1000)])]
    sample = evaluate_backlog(METRIC, SPEC, stalled, SELECTOR, T0)
    assert sample is not None and sample.value is not None and math.isnan(sample.value)
    with pytest.raises(
        EmptyResult, match="requests are queued on the prefill pods but none finished in the last 120s"
    ):
        provider().resolve(METRIC, sample, SELECTOR)


def test_a_pod_without_a_gauge_is_a_gap_never_a_smaller_backlog() -> None:
    broken = [*FLEET[:1], pod("prefill-c", "prefill", None, 2, [(0, 0), (1, 100), (2, 200)])]
    sample = evaluate_backlog(METRIC, SPEC, broken, SELECTOR, T0)
    assert sample is not None
    assert [str(gap) for gap in sample.gaps] == ["vllm:num_requests_running absent on prod/prefill-c"]
    with pytest.raises(GaugeGap):
        provider().resolve(METRIC, sample, SELECTOR)


def test_no_pod_of_the_role_is_no_value() -> None:
    assert evaluate_backlog(METRIC, SPEC, FLEET[2:], SELECTOR, T0) is None


def test_a_static_targets_pod_labels_are_carried_as_prometheus_labels() -> None:
    target = static_target("http://10.0.0.5:8000", "prod", "/metrics", {"llm-d.ai/role": "prefill"})
    assert dict(target.labels) == {
        "instance": "10.0.0.5:8000",
        "namespace": "prod",
        "llm_d_ai_role": "prefill",
    }
