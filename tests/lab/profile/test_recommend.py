"""Targets read off monotone fits at 85 % of the knee,
saturation below 1 there, and a config the adapter accepts."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.config import load
from lab.profile.knee import find_knee, isotonic
from lab.profile.recommend import HEADROOM, config_snippet, fitted, recommend
from lab.profile.schema import Knee
from tests.lab.profile.builders import step

STEPS = [
    step(2.0, running=2.0, waiting=0.0, kv=0.2),
    step(4.0, running=4.0, waiting=0.0, kv=0.4),
    step(6.0, running=6.0, waiting=0.4, kv=0.5),
    step(8.0, running=8.0, waiting=2.0, kv=0.7),
    step(9.0, running=8.0, waiting=30.0, kv=0.75, stable=False),
]


def test_each_target_is_the_metrics_value_at_85_percent_of_the_knee() -> None:
    """The knee is 8 req/s; at 6.8 req/s the (already monotone) curves interpolate 40 % of the way
    from the 6 to the 8 req/s step; the divisors are the curves at the knee."""
    knee = find_knee(STEPS, 0.9)
    assert knee is not None and knee.rate == 8.0
    targets, parameters, refused = recommend(STEPS, knee)
    at = HEADROOM * 8.0
    inflight = 6.4 + 0.4 * (10.0 - 6.4)
    assert targets["vllm_requests_inflight"].type == "AverageValue"
    assert targets["vllm_requests_inflight"].value == pytest.approx(round(inflight, 1))
    assert targets["vllm_kv_cache_usage"].value == pytest.approx(round(0.5 + 0.4 * 0.2, 2))
    assert targets["vllm_kv_cache_usage"].type == "Value"
    waiting = 0.4 + 0.4 * 1.6
    assert targets["vllm_requests_waiting"].value == pytest.approx(max(1.0, round(waiting, 1)))
    assert parameters == {"capacity": 10.0, "queue_target": 2.0, "kv_target": 0.7}
    expected = max(inflight / 10.0, (0.5 + 0.4 * 0.2) / 0.7, waiting / 2.0)
    assert targets["vllm_saturation"].value == pytest.approx(round(expected, 2))
    assert f"{at:.3g} of 8 req/s" in targets["vllm_requests_inflight"].reasoning
    assert all(t.reasoning for t in targets.values())
    assert refused == {}


def test_one_noisy_step_moves_the_curve_by_its_weight_and_never_makes_it_fall() -> None:
    """A step that reads more in flight than the next one up is pooled with it: the fitted curve is
    their weighted mean there, and the target lies between the honest neighbours."""
    noisy = [*STEPS[:2], step(6.0, running=11.0, waiting=0.4, kv=0.5), *STEPS[3:]]
    knee = find_knee(noisy, 0.9)
    assert knee is not None
    curve = fitted(noisy, knee.rate, lambda s: s.concurrency)
    values = [v for _x, v in curve.points]
    assert values == sorted(values)
    assert curve.at(6.0) == curve.at(8.0) == pytest.approx((11.4 + 10.0) / 2)
    targets, _parameters, _refused = recommend(noisy, knee)
    assert targets["vllm_requests_inflight"].value == pytest.approx(round(curve.at(6.8), 1))


def test_isotonic_is_the_pool_adjacent_violators_fit() -> None:
    """Weights pool: (1, 4, w1) and (2, 2, w3) become their weighted mean 2.5; an ordered run is untouched."""
    assert isotonic([(0.0, 0.0, 1.0), (1.0, 4.0, 1.0), (2.0, 2.0, 3.0), (3.0, 5.0, 1.0)]) == [
        (0.0, 0.0),
        (1.0, 2.5),
        (2.0, 2.5),
        (3.0, 5.0),
    ]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.1, 50.0), st.floats(0.0, 40.0), st.floats(0.0, 20.0), st.floats(0.0, 1.0)),
        min_size=1,
        max_size=8,
        unique_by=lambda t: round(t[0], 3),
    )
)
def test_saturation_at_85_percent_of_the_knee_is_below_one_and_targets_never_fall(
    points: list[tuple[float, float, float, float]],
) -> None:
    """Whatever the held steps read (noisy, flat, falling), each fitted curve rises or stays with the
    rate, and `vllm_saturation` at 85 % of the knee reads below 1 with the parameters it recommends."""
    held_steps = [step(round(r, 3), running=run, waiting=w, kv=kv) for r, run, w, kv in points]
    top = max(s.offered_rate for s in held_steps)
    steps = [*held_steps, step(top * 1.1, held=False)]
    knee = find_knee(steps, 0.9)
    assert knee is not None and knee.rate == top
    targets, parameters, refused = recommend(steps, knee)
    for value in (lambda s: s.concurrency, lambda s: s.waiting, lambda s: s.kv_usage):
        curve = fitted(steps, knee.rate, value)
        assert all(a[1] <= b[1] for a, b in itertools.pairwise(curve.points))
    if "vllm_saturation" in targets:
        assert targets["vllm_saturation"].value < 1.0
        assert "capacity" in parameters
    else:
        assert "vllm_saturation" in refused and parameters == {}
    assert set(targets) | set(refused) == {
        "vllm_requests_inflight",
        "vllm_requests_waiting",
        "vllm_kv_cache_usage",
        "vllm_saturation",
    }


def test_a_metric_that_does_not_rise_gets_no_target_with_the_reason() -> None:
    """The queue stays empty up to the knee: no waiting target, and no queue term in saturation."""
    steps = [step(2.0, running=2.0, kv=0.2), step(4.0, running=4.0, kv=0.4), step(5.0, held=False)]
    knee = find_knee(steps, 0.9)
    assert knee is not None
    targets, parameters, refused = recommend(steps, knee)
    assert "vllm_requests_waiting" not in targets
    assert "does not rise with load" in refused["vllm_requests_waiting"]
    assert "queue_target" not in parameters and "capacity" in parameters


def test_a_cache_full_at_half_the_knee_gets_no_target() -> None:
    """When KV usage is already high at half the knee (the KV-bound regime), no KV target, and why."""
    steps = [step(2.0, running=2.0, kv=0.85), step(4.0, running=4.0, kv=0.95), step(5.0, held=False)]
    knee = find_knee(steps, 0.9)
    assert knee is not None
    targets, parameters, refused = recommend(steps, knee)
    assert "vllm_kv_cache_usage" not in targets and "kv_target" not in parameters
    assert "cannot tell load levels apart" in refused["vllm_kv_cache_usage"]


def test_an_in_flight_curve_flat_up_to_the_knee_leaves_saturation_without_capacity() -> None:
    knee = Knee(rate=3.0, concurrency=4.0, kv_usage=0.0, ttft_seconds=0.1, tpot_seconds=0.01)
    steps = [step(1.0, running=4.0, kv=0.0), step(3.0, running=4.0, kv=0.0)]
    targets, parameters, refused = recommend(steps, knee)
    assert "vllm_saturation" not in targets and parameters == {}
    assert "vllm_saturation" in refused


def test_the_snippet_is_a_configuration_the_adapter_serves() -> None:
    """The YAML uses the adapter's own keys: loading it serves `vllm_saturation` with those knees."""
    text = config_snippet({"capacity": 12.5, "kv_target": 0.7, "queue_target": 2.0})
    assert (
        text == "metrics:\n  vllm_saturation:\n    capacity: 12.5\n    kv_target: 0.7\n    queue_target: 2\n"
    )
    config = load(text)
    assert config.metrics["vllm_saturation"].capacity == 12.5
    assert "vllm_saturation" in {metric.name for metric in config.catalogue()}
