"""The load a rehearsal plays: recorded traffic (a trace file, a Prometheus range or the demo's day),
compressed to fit a run, as Poisson arrivals with request sizes.

The traffic is a backtest `History` (requests per step, gaps kept as gaps). Compression squeezes its
time axis (`compress` trace seconds pass in one second of the run) and keeps its rates, so a day's
shape plays in minutes on the fleet it needed; `rate_scale` then resizes the rates to the fleet at
hand (a production trace onto two GPUs). Within a step, arrivals are Poisson at the step's rate (a
Poisson process restarted at each step boundary is still one, being memoryless), seeded: the same
seed sends the same requests at the same times. A request's size is the step's recorded mean where
the trace has token columns, else a draw from the profile's workload.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from lab.backtest.history import History
from lab.demo.loadgen import Scenario
from lab.load.workload import Sampler, Workload


class Send(NamedTuple):
    """One request of the load: when it is sent (seconds into the run), its prompt and its length."""

    at: float
    prompt: list[int]
    """Token ids (random, so no two prompts share a prefix block)."""
    output_tokens: int


@dataclass(frozen=True)
class Load:
    """Traffic to play: `history` on its own time axis, compressed and rescaled."""

    history: History
    compress: float = 1.0
    """Trace seconds per second of the run."""
    rate_scale: float = 1.0
    """Factor on every rate of the trace."""
    day: Scenario | None = None
    """The demo's day this history was made from (its stage names label the ticks); `None` for a trace."""

    def __post_init__(self) -> None:
        if not self.compress > 0 or not self.rate_scale > 0:
            raise ValueError(
                f"compression {self.compress!r} and rate scale {self.rate_scale!r} must be positive"
            )

    @property
    def step(self) -> float:
        """Seconds of the run one step of the trace lasts."""
        return self.history.step / self.compress

    @property
    def duration(self) -> float:
        """Seconds of the run the load lasts."""
        return self.history.duration / self.compress

    @property
    def source(self) -> str:
        squeeze = f", {self.compress:g}x compressed" if self.compress != 1 else ""
        scale = f", rates x{self.rate_scale:g}" if self.rate_scale != 1 else ""
        return f"{self.history.source}{squeeze}{scale}"

    def rate(self, index: int) -> float:
        """Requests per second of the run in step `index` (0 in a gap: nothing is played there)."""
        arrivals = self.history.arrivals[index]
        return 0.0 if math.isnan(arrivals) else arrivals / self.history.step * self.rate_scale

    def rate_at(self, t: float) -> float:
        """The offered rate at `t` seconds into the run."""
        index = min(max(0, int(t / self.step)), len(self.history.arrivals) - 1)
        return self.rate(index)

    def stage_at(self, t: float) -> str:
        """The demo day's stage at `t`, or `gap` / `load` for a trace."""
        if self.day is not None:
            return self.day.at(t * self.compress)[0].name
        index = min(max(0, int(t / self.step)), len(self.history.arrivals) - 1)
        return "gap" if math.isnan(self.history.arrivals[index]) else "load"

    @property
    def peak_rate(self) -> float:
        """The highest rate of any step (requests per second of the run)."""
        return max(self.rate(i) for i in range(len(self.history.arrivals)))

    def sends(self, workload: Workload, seed: int = 0) -> Iterator[Send]:
        """The requests in time order: Poisson within each step; deterministic for a seed."""
        rng = random.Random(seed)
        sizes = Sampler(workload, seed)
        prompts, outputs = self.history.prompt_tokens, self.history.output_tokens
        for index in range(len(self.history.arrivals)):
            rate = self.rate(index)
            if rate <= 0:
                continue
            begin, end = index * self.step, (index + 1) * self.step
            at = begin + rng.expovariate(rate)
            while at < end:
                length, output = _recorded(prompts, index), _recorded(outputs, index)
                if length is None or output is None:
                    ids, drawn = sizes.draw()
                    ids = ids if length is None else sizes.prompt(length)
                    yield Send(at, ids, output or drawn)
                else:
                    yield Send(at, sizes.prompt(length), output)
                at += rng.expovariate(rate)


def _recorded(series: tuple[float, ...] | None, index: int) -> int | None:
    """A step's recorded mean token count, rounded; `None` where the trace has none."""
    if series is None or math.isnan(series[index]) or series[index] < 1:
        return None
    return round(series[index])


def day_history(day: Scenario, capacity: float) -> History:
    """The demo's day as traffic on a 1 s grid: each second's offered load (multiples of one replica's
    capacity) times `capacity` (requests per second)."""
    seconds = math.ceil(day.duration)
    return History(
        step=1.0,
        arrivals=tuple(day.at(t + 0.5)[1] * capacity for t in range(seconds)),
        source=f"the demo's day {day.name!r} at {capacity:.3g} req/s per replica",
    )
