"""The provider's failure table (adapter/provider.py): one table of raw facts → one answer.

Sources report facts (`Sample`); the provider alone decides what they mean. Each row here is a fact a
real source produced in a reproduced failure (issue 10), and the answer DESIGN.md §3 requires. The
clock is injected, so ages are exact and no test waits.
"""

from __future__ import annotations

import math

import pytest

from adapter.cache import ValueCache
from adapter.errors import (
    AdapterError,
    EmptyResult,
    FutureSample,
    GaugeGap,
    MetricNotFound,
    StaleSample,
    Unresolved,
)
from adapter.provider import MAX_CLOCK_SKEW_SECONDS, CachedProvider
from adapter.sources import Gap, Sample
from adapter.telemetry import Telemetry
from adapter.vocabulary.catalogue import BUILTIN, MetricDef, PromQLSpec, builtin
from adapter.vocabulary.selectors import parse as parse_selector
from tests.fakes import FakeSource, HandClock

NOW = 1_800_000_000.0
USER = MetricDef(
    "queue_depth", "upstream queue", "messages", PromQLSpec("sum(q{<<.LabelMatchers>>})"), on_empty=None
)
USER_ZERO = MetricDef("dlq_depth", "dead letters", "messages", PromQLSpec("sum(d{<<.LabelMatchers>>})"))
GAUGES = [m.name for m in BUILTIN if m.unit in ("requests", "ratio")]
EVENTS = ["vllm_tpot_seconds", "vllm_ttft_seconds"]


def make_provider(metrics: tuple[MetricDef, ...] = (*BUILTIN, USER, USER_ZERO)) -> CachedProvider:
    clock = HandClock()
    clock.now = NOW
    return CachedProvider(
        metrics,
        FakeSource(),
        ValueCache(5.0, 300.0),
        default_max_age=90.0,
        telemetry=Telemetry(),
        wall=clock,
    )


def resolve(name: str, sample: Sample) -> float:
    provider = make_provider()
    return provider.resolve(provider.lookup(name), sample, parse_selector("model_name=llama")).value


# (metric, sample, expected value or error class)
ROWS: list[tuple[str, Sample, float | type[AdapterError]]] = [
    # fresh values pass through, for every kind of metric
    *[(name, Sample(3.0, NOW - 4, 2), 3.0) for name in GAUGES],
    ("vllm_tpot_seconds", Sample(0.031, NOW - 4, 2), 0.031),
    ("vllm_ttft_seconds", Sample(0.42, NOW - 4, 2), 0.42),
    ("queue_depth", Sample(17.0, NOW - 4, None), 17.0),
    # stale: the oldest contributing sample is older than max_age (137 s, as a user saw)
    *[(name, Sample(3.0, NOW - 137, 2), StaleSample) for name in (*GAUGES, *EVENTS, "queue_depth")],
    # from the future beyond the skew allowance (one day ahead), or a time that is not a number
    *[(name, Sample(42.0, NOW + 86400, 2), FutureSample) for name in (*GAUGES, *EVENTS, "queue_depth")],
    ("vllm_requests_waiting", Sample(42.0, NOW + MAX_CLOCK_SKEW_SECONDS + 0.5, 1), FutureSample),
    ("vllm_requests_waiting", Sample(42.0, NOW + MAX_CLOCK_SKEW_SECONDS - 0.5, 1), 42.0),
    *[(name, Sample(1.0, math.nan, 2), FutureSample) for name in (*GAUGES, *EVENTS)],
    ("vllm_requests_waiting", Sample(1.0, math.inf, 2), FutureSample),
    # a gauge never takes on_empty: absent everywhere, absent on one pod, NaN or Inf → 503
    *[(name, Sample(None, NOW - 1, 2), GaugeGap) for name in GAUGES],
    *[(name, Sample(math.nan, NOW - 1, 2), GaugeGap) for name in GAUGES],
    ("vllm_requests_waiting", Sample(math.inf, NOW - 1, 2), GaugeGap),
    (
        "vllm_requests_inflight",
        Sample(7.0, NOW - 1, 1, (Gap("vllm:num_requests_waiting", "prod/llama-0", "absent"),)),
        GaugeGap,
    ),
    (
        "vllm_requests_waiting",
        Sample(40.0, NOW - 1, 2, (Gap("vllm:num_requests_waiting", "prod/llama-1", "inf"),)),
        GaugeGap,
    ),
    # an event statistic with no events (no traffic in the window) takes on_empty, NaN (0/0) too
    *[(name, Sample(None, NOW - 1, 2), 0.0) for name in EVENTS],
    *[(name, Sample(math.nan, NOW - 1, 2), 0.0) for name in EVENTS],
    ("vllm_tpot_seconds", Sample(math.inf, NOW - 1, 2), 0.0),
    # user metrics: on_empty 'error' (the default) is 503, a configured on_empty is served
    ("queue_depth", Sample(None, NOW - 1, None), EmptyResult),
    ("dlq_depth", Sample(None, NOW - 1, None), 0.0),
    # the unresolved-quantile rule: p90 in the first bucket or past the last finite one
    ("vllm_ttft_seconds", Sample(0.0005, NOW - 1, 2), Unresolved),
    ("vllm_ttft_seconds", Sample(4000.0, NOW - 1, 2), Unresolved),
]


@pytest.mark.parametrize(("name", "sample", "expected"), ROWS)
def test_failure_table(name: str, sample: Sample, expected: float | type[AdapterError]) -> None:
    """Each fact gets exactly the answer the failure table names; an error is never a number."""
    if isinstance(expected, float):
        assert resolve(name, sample) == pytest.approx(expected)
    else:
        with pytest.raises(expected):
            resolve(name, sample)


def test_a_gap_names_the_family_and_the_pod() -> None:
    """The cause a person reads in the log names what is missing and where."""
    gaps = tuple(Gap("vllm:num_requests_waiting", f"prod/llama-{i}", "absent") for i in range(5))
    with pytest.raises(GaugeGap) as caught:
        resolve("vllm_requests_inflight", Sample(7.0, NOW - 1, 5, gaps))
    message = str(caught.value)
    assert "vllm:num_requests_waiting absent on prod/llama-0" in message
    assert "(and 2 more)" in message
    assert caught.value.status("vllm_requests_inflight")["code"] == 503


def test_the_age_served_is_the_oldest_sample_age() -> None:
    """The age reported (and used for max_age) is now minus the sample time, never clamped up."""
    provider = make_provider()
    value = provider.resolve(builtin("vllm_requests_waiting"), Sample(5.0, NOW - 12.5, 1), parse_selector(""))
    assert value.age == pytest.approx(12.5)
    assert value.timestamp == NOW - 12.5


def test_a_small_clock_skew_is_served_with_age_zero() -> None:
    """A pod's clock a second ahead is normal drift: the value is served with age 0, not negative."""
    provider = make_provider()
    value = provider.resolve(builtin("vllm_requests_waiting"), Sample(5.0, NOW + 1.0, 1), parse_selector(""))
    assert value.age == 0.0


def test_per_metric_max_age_overrides_the_default() -> None:
    """`max_age` set on the metric wins over the source's default, both ways."""
    strict = builtin("vllm_requests_waiting").with_overrides(max_age_seconds=10.0)
    provider = make_provider((strict,))
    with pytest.raises(StaleSample):
        provider.resolve(strict, Sample(5.0, NOW - 11, 1), parse_selector(""))
    lenient = builtin("vllm_requests_waiting").with_overrides(max_age_seconds=600.0)
    provider = make_provider((lenient,))
    assert provider.resolve(lenient, Sample(5.0, NOW - 500, 1), parse_selector("")).value == 5.0


def test_unknown_metric_is_not_found() -> None:
    with pytest.raises(MetricNotFound):
        make_provider().lookup("vllm_no_such_metric")


async def test_get_goes_through_the_cache_and_the_table() -> None:
    """`get` fetches once through the cache and judges the outcome: a gauge gap fetched from the
    source reaches the caller as GaugeGap, on every read, never as the on_empty value."""
    provider = make_provider()
    fake = provider.source
    assert isinstance(fake, FakeSource)
    fake.answers["vllm_requests_waiting"] = Sample(None, NOW - 1, 2)
    try:
        for _ in range(3):
            with pytest.raises(GaugeGap):
                await provider.get("vllm_requests_waiting", "prod", parse_selector(""))
        assert len(fake.fetches) == 1
    finally:
        await provider.cache.close()
