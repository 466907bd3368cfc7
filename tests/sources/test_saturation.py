"""`vllm_saturation` computed from scraped pods (adapter/sources/evaluation.py).

Per pod the largest of inflight / capacity, KV usage / kv_target and waiting / queue_target; the
value is the mean over pods. Hand-computed cases, the gauge rule (absent or NaN gauges are gaps,
which the provider answers with 503), and the property the aggregation was chosen for: an HPA with
a Value target of 1 (`desired = ceil(current × value)`, the lab's model of the controller) asks for
the same replicas however many pods currently share a load.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest

from adapter.cache import ValueCache
from adapter.errors import GaugeGap
from adapter.provider import CachedProvider
from adapter.sources import Gap
from adapter.sources.evaluation import evaluate
from adapter.telemetry import Telemetry
from adapter.vocabulary import catalogue, selectors
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.quantity import format_quantity
from lab.hpa.replicas import Scale, Tolerances, external_proposal
from lab.hpa.spec import ExternalMetric, milli_value
from tests import saturation_fleet as fleet
from tests.fakes import FakeSource, HandClock
from tests.saturation_fleet import Engine

LLAMA = selectors.parse("model_name=llama")
EVERYTHING = selectors.parse("")


def value(
    metric: MetricDef, pods: Mapping[str, tuple[Engine, ...]], selector: selectors.Selector = EVERYTHING
) -> float:
    sample = evaluate(metric, fleet.snapshots(pods), selector, fleet.T0)
    assert sample is not None and sample.value is not None
    return sample.value


def test_each_pod_is_bound_by_its_own_largest_term() -> None:
    """tests/saturation_fleet.py: inflight binds one pod (0.8), KV another (0.95, through the old
    gpu_cache_usage_perc name), the queue the third (1.5, two engines summed); mean 1.0833."""
    sample = evaluate(catalogue.saturation(10, 0.8, 4), fleet.snapshots(), LLAMA, fleet.T0)
    assert sample is not None
    assert sample.value == pytest.approx((0.8 + 0.95 + 1.5) / 3)
    assert (sample.targets, sample.timestamp, sample.gaps) == (3, fleet.T0, ())


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        # inflight only: (8 + 4 + 12) / (3 × 10)
        pytest.param(
            catalogue.saturation(10), 24 / 30, id="capacity only is fleet inflight over pods x capacity"
        ),
        # a: max(0.8, 0.5), b: max(0.4, 0.95), c: max(1.2, 0.75)
        pytest.param(catalogue.saturation(10, 0.8), (0.8 + 0.95 + 1.2) / 3, id="with kv_target"),
        # a: max(0.8, 0.5), b: max(0.4, 0), c: max(1.2, 1.5)
        pytest.param(catalogue.saturation(10, queue_target=4), (0.8 + 0.4 + 1.5) / 3, id="with queue_target"),
    ],
)
def test_terms_left_out_do_not_count(metric: MetricDef, expected: float) -> None:
    """A target not configured drops its term (as if it were infinite)."""
    assert value(metric, dict(fleet.FLEET), LLAMA) == pytest.approx(expected)


def test_the_selector_picks_series_within_pods() -> None:
    """model_name=qwen leaves one pod: max(39/10, 0.99/0.8, 9/4) = 3.9."""
    assert value(catalogue.saturation(10, 0.8, 4), dict(fleet.FLEET), selectors.parse("model_name=qwen")) == (
        pytest.approx(3.9)
    )


def test_a_missing_waiting_gauge_is_a_gap_and_the_pod_keeps_its_other_terms() -> None:
    """As PromQL: running + waiting has no group for the pod, the KV term remains; and the gap
    makes the provider answer 503, never a number."""
    pods = fleet.snapshots({"p": (Engine("llama", 4, 0, 0.4),)})
    del pods[0].page[fleet.WAITING]
    sample = evaluate(catalogue.saturation(10, 0.8, 4), pods, EVERYTHING, fleet.T0)
    assert sample is not None
    assert sample.value == pytest.approx(0.5)
    assert sample.gaps == (Gap(fleet.WAITING, "prod/p", "absent"),)


def test_a_nan_kv_gauge_is_a_gap_only_when_the_kv_term_is_in() -> None:
    """KV usage NaN: a gap with kv_target (the max skips NaN, as PromQL's does); without kv_target
    the KV gauge is not read at all."""
    pods = {"p": (Engine("llama", 4, 1, math.nan),)}
    with_kv = evaluate(catalogue.saturation(10, 0.8), fleet.snapshots(pods), EVERYTHING, fleet.T0)
    assert with_kv is not None
    assert with_kv.value == pytest.approx(0.5)
    assert with_kv.gaps == (Gap(fleet.KV_NEW, "prod/p", "nan"),)
    without = evaluate(catalogue.saturation(10), fleet.snapshots(pods), EVERYTHING, fleet.T0)
    assert without is not None
    assert without.value == pytest.approx(0.5)
    assert without.gaps == ()


def test_the_provider_answers_a_gap_with_503() -> None:
    """The gauge rule applies to saturation as to any gauge: GaugeGap (503), never `on_empty`."""
    pods = fleet.snapshots({"p": (Engine("llama", 4, 0, 0.4),)})
    del pods[0].page[fleet.WAITING]
    metric = catalogue.saturation(10, 0.8)
    sample = evaluate(metric, pods, EVERYTHING, fleet.T0)
    assert sample is not None
    clock = HandClock()
    clock.now = fleet.T0
    provider = CachedProvider(
        (metric,),
        FakeSource(),
        ValueCache(1.0, 60.0),
        default_max_age=5.0,
        telemetry=Telemetry(),
        wall=clock,
    )
    with pytest.raises(GaugeGap, match="vllm_saturation: vllm:num_requests_waiting absent on prod/p"):
        provider.resolve(metric, sample, EVERYTHING)


# --- The aggregation, as the HPA uses it ----------------------------------------------------------


def spread(
    total_running: float, total_waiting: float, total_kv: float, pods: int
) -> dict[str, tuple[Engine, ...]]:
    """A load spread evenly over `pods`: each holds its share of the requests and of the KV blocks."""
    return {
        f"p{i}": (Engine("llama", total_running / pods, total_waiting / pods, total_kv / pods),)
        for i in range(pods)
    }


def desired(saturation: float, current: int) -> int:
    """The HPA controller's proposal for `type: Value, value: 1` (lab/hpa, Kubernetes' arithmetic),
    from the quantity the adapter serves (rounded to the milli-unit)."""
    metric = ExternalMetric(catalogue.SATURATION, "Value", "1")
    served = milli_value(format_quantity(saturation))
    return external_proposal(metric, served, Scale(current, current, current), Tolerances(0.1, 0.1)).replicas


@pytest.mark.parametrize(
    ("running", "waiting", "kv", "pods_at_knee"),
    [
        pytest.param(136, 8, 1.2, 3, id="inflight binds: 144 requests at 48 per pod"),
        pytest.param(40, 0, 3.6, 4, id="KV binds: 3.6 pods' worth of KV at 0.9 each"),
        pytest.param(60, 40, 0.9, 10, id="the queue binds: 40 waiting at 4 per pod"),
    ],
)
def test_the_hpa_settles_where_every_pod_is_at_its_knee(
    running: float, waiting: float, kv: float, pods_at_knee: int
) -> None:
    """Whatever the current replica count N, a fixed load spread over N pods gives N × value = the
    pods needed to hold it at the knee (the mean scales as 1/N), so the HPA proposes that count from
    anywhere (one more at most: the milli-unit rounding tips a whole number over, or the 10 % tolerance
    keeps a count just above), and at that count the value is 1: it stays."""
    metric = catalogue.saturation(48, 0.9, 4)
    for n in (1, 2, 3, 4, 5, 8, 10, 13):
        saturation = value(metric, spread(running, waiting, kv, n))
        assert n * saturation == pytest.approx(pods_at_knee), n
        assert desired(saturation, n) in (pods_at_knee, pods_at_knee + 1), n
    assert value(metric, spread(running, waiting, kv, pods_at_knee)) == pytest.approx(1.0)
    assert desired(1.0, pods_at_knee) == pods_at_knee


def test_a_sum_or_a_max_over_pods_would_not_settle() -> None:
    """Why the mean. 12 requests, capacity 10: the sum over pods stays at 1.2 however many pods share
    them, so ceil(N × 1.2) adds a pod at every sync (a runaway to maxReplicas); the max follows the
    hottest pod, so one pod holding 10 of 11 requests keeps all 10 pods. The mean asks for 2 in both."""
    metric = catalogue.saturation(10)
    for n in (2, 3, 4):
        per_pod = [12 / n / 10] * n
        assert desired(sum(per_pod), n) == n + 1
        assert desired(value(metric, spread(12, 0, 0, n)), n) == 2
    hot = {"hot": (Engine("llama", 10, 0, 0.1),)} | {
        f"cold{i}": (Engine("llama", 0.1, 0, 0.1),) for i in range(9)
    }
    assert desired(1.0, 10) == 10  # the max over pods: the hot pod's 1.0
    assert desired(value(metric, hot), 10) == 2  # the mean: 10.9 requests / (10 × 10) = 0.109
