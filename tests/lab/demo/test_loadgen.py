"""Traffic profiles and Poisson arrivals of the demo's load generator."""

from __future__ import annotations

import itertools
import math
import random
import statistics

import pytest

from lab.demo.loadgen import (
    SCENARIOS,
    Arrival,
    RequestShape,
    Scenario,
    Stage,
    arrivals,
    draw_below,
    prompt_token_ids,
)

FLAT = Scenario("flat", (Stage("steady", 2000, 1.0),), "constant load")


def test_same_seed_same_requests() -> None:
    """A run is reproducible: the same seed yields the same arrivals, times and shapes included."""
    first = list(arrivals(SCENARIOS["smoke"], 5.0, seed=7))
    assert first == list(arrivals(SCENARIOS["smoke"], 5.0, seed=7))
    assert first != list(arrivals(SCENARIOS["smoke"], 5.0, seed=8))


def test_constant_load_is_a_poisson_process() -> None:
    """At a constant rate the count is rate x duration within 4 standard deviations (sqrt of the mean) and the
    gaps are exponential: their coefficient of variation is 1 within 5 %."""
    times = [a.at for a in arrivals(FLAT, 5.0, seed=1)]
    expected = 5.0 * 2000
    assert abs(len(times) - expected) < 4 * math.sqrt(expected)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert statistics.stdev(gaps) / statistics.mean(gaps) == pytest.approx(1.0, abs=0.05)
    assert times == sorted(times)


def test_arrivals_follow_the_profile() -> None:
    """Thinning keeps each stage's count at its integrated load: a linear ramp from 0 to 2 carries as many
    requests as a flat stage at 1 of the same length, and an idle stage at 0 carries none (4 sigma bounds)."""
    profile = Scenario(
        "shape", (Stage("off", 300, 0.0), Stage("ramp", 1000, 0.0, 2.0), Stage("flat", 1000, 1.0)), ""
    )
    counts: dict[str, int] = {}
    for arrival in arrivals(profile, 4.0, seed=3):
        counts[arrival.stage] = counts.get(arrival.stage, 0) + 1
    assert "off" not in counts
    expected = 4.0 * 1000
    for stage in ("ramp", "flat"):
        assert abs(counts[stage] - expected) < 4 * math.sqrt(expected), stage
    first_half = sum(1 for a in arrivals(profile, 4.0, seed=3) if 300 <= a.at < 800)
    assert first_half < counts["ramp"] / 2  # the ramp rises: its first half is the lighter one


def test_request_shapes_match_the_real_capture() -> None:
    """Prompts U[200,1800] (mean 1000), 30 % opening with the 512-token shared prefix, max_tokens U[64,512]
    (mean 288): shared/data/vllm-0.26.0/README.md. Means within 3 %, the shared share within 2 points."""
    sample = list(arrivals(FLAT, 5.0, seed=2))
    prompts = [a.prompt_tokens for a in sample]
    outputs = [a.max_tokens for a in sample]
    assert (min(prompts), max(prompts)) >= (200, 1790) and max(prompts) <= 1800
    assert (min(outputs), max(outputs)) == (64, 512)
    assert statistics.mean(prompts) == pytest.approx(1000, rel=0.03)
    assert statistics.mean(outputs) == pytest.approx(288, rel=0.03)
    shared = [a for a in sample if a.shared_prefix_tokens]
    assert len(shared) / len(sample) == pytest.approx(0.3, abs=0.02)
    assert {a.shared_prefix_tokens for a in shared if a.prompt_tokens >= 512} == {512}


def test_prompt_token_ids_share_the_prefix_only() -> None:
    """Requests with the shared prefix start with the same token ids (a prefix-cache hit in vLLM); the rest of
    every prompt is its own, and the length is the prompt's."""
    a = Arrival(0.0, "s", 900, 512, 64, seed=1)
    b = Arrival(1.0, "s", 700, 512, 64, seed=2)
    c = Arrival(2.0, "s", 700, 0, 64, seed=2)
    ids_a, ids_b, ids_c = (prompt_token_ids(x, vocab_size=1000) for x in (a, b, c))
    assert (len(ids_a), len(ids_b), len(ids_c)) == (900, 700, 700)
    assert ids_a[:512] == ids_b[:512]
    assert ids_a[512:700] != ids_b[512:700]
    assert ids_c[:512] != ids_a[:512]
    assert max(ids_a + ids_b + ids_c) < 1000


@pytest.mark.parametrize("bound", [1, 2, 3, 1000, 1024, 1025, 32000, 2**40 + 7])
def test_draw_below_draws_what_randrange_draws(bound: int) -> None:
    """The prompts' fast draw takes the same numbers from the same generator state as `randrange`, and
    leaves the generator where `randrange` would: a demo's prompts, hence its run, are unchanged."""
    fast, slow = random.Random(bound), random.Random(bound)
    assert draw_below(fast, bound, 500) == [slow.randrange(bound) for _ in range(500)]
    assert fast.random() == slow.random()


def test_draw_below_refuses_an_empty_range() -> None:
    """As `randrange(0)` does, where a loop on zero bits would never end."""
    with pytest.raises(ValueError, match="bound 0 must be a positive int"):
        draw_below(random.Random(0), 0, 3)


def test_prompt_token_ids_are_the_draws_of_the_prefix_seed_and_the_request_seed() -> None:
    """The ids as they were drawn one `randrange` at a time before the shared prefix was cached."""
    arrival = Arrival(0.0, "s", 600, 512, 64, seed=7)
    prefix, own = random.Random(512), random.Random(7)
    expected = [prefix.randrange(32000) for _ in range(512)] + [own.randrange(32000) for _ in range(88)]
    assert prompt_token_ids(arrival) == expected
    assert prompt_token_ids(arrival) == expected  # from the cache the second time


@pytest.mark.parametrize("name", ["default", "smoke"])
def test_profiles_go_idle_ramp_spike_drain(name: str) -> None:
    """Every built-in profile runs idle → ramp → spike → drain (→ idle), peaks in the spike, and leaves the
    downscale stabilization window plus a minute after the spike for the scale-down."""
    profile = SCENARIOS[name]
    assert [s.name for s in profile.stages][:4] == ["idle", "ramp", "spike", "drain"]
    spike_start, spike_end = profile.bounds("spike")
    assert profile.at(spike_start + 1)[1] == profile.peak
    assert profile.at(0)[1] < profile.peak / 5
    assert profile.duration - spike_end >= profile.downscale_stabilization + 60


def test_smoke_profile_runs_under_a_minute() -> None:
    """`--profile smoke` lasts under a minute of wall time at its own time scale."""
    smoke = SCENARIOS["smoke"]
    assert smoke.duration / smoke.time_scale < 60


def test_default_profile_runs_about_two_minutes() -> None:
    """With --real-time the default profile shows scale-up
    and scale-down in about two minutes of wall time."""
    default = SCENARIOS["default"]
    assert 90 <= default.duration / default.time_scale <= 150


def test_zero_idle_profile_falls_to_nothing_long_enough_to_reach_zero_then_bursts() -> None:
    """zero-idle goes through the queue from two replicas with minReplicas 0: the evening ends in nothing
    for longer than the scale-down window (the fleet reaches zero and stays there a while), a morning
    burst, then nothing again for the window and a minute more (the fleet returns to zero)."""
    zero = SCENARIOS["zero-idle"]
    assert (zero.queue, zero.min_replicas, zero.start_replicas) == (True, 0, 2)
    night_start, night_end = zero.bounds("night")
    morning_start, morning_end = zero.bounds("morning")
    assert zero.at(night_start + 1)[1] == 0.0 == zero.at(morning_end + 1)[1]
    assert night_end - night_start >= zero.downscale_stabilization + 300
    assert zero.at(morning_start + 1)[1] == zero.peak
    assert zero.duration - morning_end >= zero.downscale_stabilization + 60
    assert zero.duration / zero.time_scale < 60
    assert not [a for a in arrivals(zero, 1.44) if night_start <= a.at < night_end]


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        pytest.param((), "stages of positive duration", id="no stages"),
        pytest.param((Stage("x", 0, 1.0),), "stages of positive duration", id="zero duration"),
        pytest.param((Stage("x", 10, 1.0, -1.0),), "negative load", id="negative load"),
    ],
)
def test_profile_validation(stages: tuple[Stage, ...], message: str) -> None:
    """Impossible profiles are refused with the rule they break."""
    with pytest.raises(ValueError, match=message):
        Scenario("bad", stages, "")


def test_profile_replicas_validation() -> None:
    with pytest.raises(ValueError, match="0 <= min_replicas <= start_replicas"):
        Scenario("bad", FLAT.stages, "", min_replicas=2, start_replicas=1)


def test_capacity_must_be_positive() -> None:
    """A rate of zero requests per second cannot scale a profile."""
    with pytest.raises(ValueError, match="must be a positive rate"):
        next(arrivals(FLAT, 0.0))


def test_custom_shape() -> None:
    """A `RequestShape` replaces the default sizes."""
    shape = RequestShape(
        prompt_min=10, prompt_max=10, shared_prefix_fraction=0.0, max_tokens_min=5, max_tokens_max=5
    )
    sample = list(arrivals(FLAT, 0.05, seed=4, shape=shape))
    assert sample
    assert {(a.prompt_tokens, a.shared_prefix_tokens, a.max_tokens) for a in sample} == {(10, 0, 5)}
