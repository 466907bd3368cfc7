"""Traffic for the demo: a scenario, Poisson arrivals and request shapes like the real capture.

A `Scenario` (what `demo --profile` names; not `lab.profile`'s measured capacity `Profile`) is a list
of stages (idle → ramp → spike → drain) and the fleet it starts from; each stage's offered load moves
linearly from `start` to `end`, in multiples of one replica's capacity, so a scenario means the same
thing whatever engine parameters the emulator runs with. `arrivals()` draws a non-homogeneous
Poisson process from it by thinning (Lewis & Shedler, 1979) with a seeded generator: the same seed
gives the same requests, arrival times included.

Request shapes follow `shared/data/vllm-0.26.0/README.md`: prompts of U[200, 1800] tokens, 30 % of
them opening with one shared 512-token prefix, `max_tokens` U[64, 512] with `ignore_eos`.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, NamedTuple


@dataclass(frozen=True)
class Stage:
    """A stretch of the profile whose offered load moves linearly from `start` to `end`."""

    name: str
    duration: float
    """Seconds (emulated time)."""
    start: float
    """Offered load at the stage's start, in multiples of one replica's capacity."""
    end: float | None = None
    """Offered load at the stage's end; `None` keeps `start`."""

    def load(self, offset: float) -> float:
        """Offered load `offset` seconds into the stage."""
        end = self.start if self.end is None else self.end
        return self.start + (end - self.start) * min(max(offset / self.duration, 0.0), 1.0)


@dataclass(frozen=True)
class Scenario:
    """A named sequence of stages, with the wall-clock compression it is meant to run at."""

    name: str
    stages: tuple[Stage, ...]
    description: str
    time_scale: float = 10.0
    """Emulated seconds per wall second that make the profile watchable (the demo's default)."""
    downscale_stabilization: float = 300.0
    """The HPA downscale stabilization window the profile leaves room for (emulated seconds)."""
    cold_start: float = 60.0
    """How long a new replica loads before it serves (emulated seconds)."""
    queue: bool = False
    """Requests go through an upstream queue (`lab.queue`) instead of straight to the Service."""
    min_replicas: int = 1
    """The HPA's `minReplicas` the profile is about (0: the fleet may scale to zero)."""
    start_replicas: int = 1
    """Replicas loaded and Ready when the load starts (at least `min_replicas`, at least 1)."""

    def __post_init__(self) -> None:
        if not self.stages or any(s.duration <= 0 for s in self.stages):
            raise ValueError(f"profile {self.name!r} must have stages of positive duration")
        if any(min(s.start, s.end if s.end is not None else s.start) < 0 for s in self.stages):
            raise ValueError(f"profile {self.name!r} must not offer a negative load")
        if not 0 <= self.min_replicas <= self.start_replicas or self.start_replicas < 1:
            raise ValueError(
                f"profile {self.name!r} replicas min {self.min_replicas} start {self.start_replicas} must "
                "satisfy 0 <= min_replicas <= start_replicas and start_replicas >= 1"
            )

    @property
    def duration(self) -> float:
        """Total length (emulated seconds)."""
        return sum(s.duration for s in self.stages)

    @property
    def peak(self) -> float:
        """The highest offered load anywhere in the profile (capacity multiples)."""
        return max(max(s.start, s.end if s.end is not None else s.start) for s in self.stages)

    def at(self, t: float) -> tuple[Stage, float]:
        """The stage running at time `t` and the offered load then; past the end, the last stage's end."""
        begin = 0.0
        for stage in self.stages:
            if t < begin + stage.duration:
                return stage, stage.load(t - begin)
            begin += stage.duration
        last = self.stages[-1]
        return last, last.load(last.duration)

    def bounds(self, name: str) -> tuple[float, float]:
        """Start and end time of the first stage called `name`."""
        begin = 0.0
        for stage in self.stages:
            if stage.name == name:
                return begin, begin + stage.duration
            begin += stage.duration
        raise KeyError(
            f"profile {self.name!r} has no stage {name!r}; stages are {[s.name for s in self.stages]}"
        )


SCENARIOS: Final[dict[str, Scenario]] = {
    profile.name: profile
    for profile in (
        Scenario(
            "default",
            (
                Stage("idle", 60, 0.3),
                Stage("ramp", 240, 0.3, 2.0),
                Stage("spike", 150, 3.5),
                Stage("drain", 90, 3.5, 0.3),
                # Long enough for the 300 s scale-down window and the Percent 100 per 15 s steps after it.
                Stage("idle", 480, 0.3),
            ),
            "a slow ramp, a spike well past the fleet's capacity, a long quiet tail "
            "(about two minutes at 10x with --real-time)",
        ),
        Scenario(
            "smoke",
            (
                Stage("idle", 20, 0.3),
                Stage("ramp", 40, 0.3, 2.0),
                Stage("spike", 90, 3.0),
                Stage("drain", 20, 3.0, 0.2),
                Stage("idle", 170, 0.2),
            ),
            "the default's story in 340 s with a 60 s scale-down window: for CI "
            "(under half a minute at 15x with --real-time)",
            time_scale=15.0,
            downscale_stabilization=60.0,
            cold_start=30.0,
        ),
        Scenario(
            "zero-idle",
            (
                Stage("evening", 240, 1.5, 0.0),
                # Nothing: the 300 s scale-down window, then the night at zero.
                Stage("night", 1200, 0.0),
                Stage("morning", 180, 2.5),
                # The backlog drains, the window passes, the fleet returns to zero.
                Stage("day", 480, 0.0),
            ),
            "through an upstream queue: evening traffic falls to nothing, the fleet scales to zero for "
            "the night, a morning burst wakes it (under a minute at 40x with --real-time)",
            time_scale=40.0,
            queue=True,
            min_replicas=0,
            start_replicas=2,
        ),
    )
}


@dataclass(frozen=True)
class RequestShape:
    """Request size distributions (defaults: the real capture's load)."""

    prompt_min: int = 200
    prompt_max: int = 1800
    shared_prefix_fraction: float = 0.3
    """Share of requests that open with the common prefix (prefix caching hits)."""
    shared_prefix_tokens: int = 512
    max_tokens_min: int = 64
    max_tokens_max: int = 512


class Arrival(NamedTuple):
    """One request of the load: when it is sent and how big it is."""

    at: float
    """Seconds since the start of the profile (emulated time)."""
    stage: str
    prompt_tokens: int
    shared_prefix_tokens: int
    """How many leading prompt tokens are the shared prefix (0 for a private prompt)."""
    max_tokens: int
    seed: int
    """Seeds this request's private prompt tokens."""


def arrivals(
    profile: Scenario, capacity_rps: float, *, seed: int = 0, shape: RequestShape | None = None
) -> Iterator[Arrival]:
    """Poisson arrivals following the profile's load × `capacity_rps`, in time order; deterministic per seed.

    Thinning: candidates come at the peak rate and each is kept with probability load(t) / peak, which
    yields a Poisson process of rate load(t) × capacity. Does not guarantee any exact count.
    """
    if capacity_rps <= 0:
        raise ValueError(f"capacity {capacity_rps!r} must be a positive rate (requests per second)")
    shape = shape or RequestShape()
    rng = random.Random(seed)
    peak = profile.peak * capacity_rps
    if peak == 0:
        return
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= profile.duration:
            return
        stage, load = profile.at(t)
        if rng.random() * peak >= load * capacity_rps:
            continue
        prompt = rng.randint(shape.prompt_min, shape.prompt_max)
        shared = rng.random() < shape.shared_prefix_fraction
        yield Arrival(
            at=t,
            stage=stage.name,
            prompt_tokens=prompt,
            shared_prefix_tokens=min(shape.shared_prefix_tokens, prompt) if shared else 0,
            max_tokens=rng.randint(shape.max_tokens_min, shape.max_tokens_max),
            seed=rng.getrandbits(32),
        )


# Any fixed seed will do: the prefix only has to be the same for every request that shares it.
_PREFIX_SEED: Final = 512


def prompt_token_ids(arrival: Arrival, vocab_size: int = 32000) -> list[int]:
    """The request's prompt as token ids: the shared prefix
    (identical across requests), then private tokens."""
    ids = list(_shared_prefix(vocab_size, arrival.shared_prefix_tokens))
    return ids + draw_below(random.Random(arrival.seed), vocab_size, arrival.prompt_tokens - len(ids))


@functools.lru_cache(maxsize=8)
def _shared_prefix(vocab_size: int, length: int) -> tuple[int, ...]:
    """The first `length` ids of the one shared prefix: drawn once per length, not per request."""
    return tuple(draw_below(random.Random(_PREFIX_SEED), vocab_size, length))


def draw_below(rng: random.Random, bound: int, count: int) -> list[int]:
    """`[rng.randrange(bound) for _ in range(count)]`, the same numbers from the same state, ~3x
    faster: `randrange` of a positive int is `_randbelow`, which for `random.Random` draws
    `bound.bit_length()` bits until they fall below `bound` (CPython 3.11-3.13;
    tests/lab/demo/test_loadgen.py holds the two equal)."""
    if bound < 1:
        raise ValueError(f"bound {bound!r} must be a positive int: no id lies below it")
    bits, draw = bound.bit_length(), rng.getrandbits
    out = []
    for _ in range(count):
        value = draw(bits)
        while value >= bound:
            value = draw(bits)
        out.append(value)
    return out
