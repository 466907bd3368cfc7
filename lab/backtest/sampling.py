"""What the HPA reads on a real fleet: gauges sampled from individual requests, not the fleet's means.

The fleet model (`lab.backtest.fleet`) moves amounts of requests, so the batch it reports is a mean
(Little's law). The adapter serves a count: each pod's `vllm:num_requests_running` and
`vllm:num_requests_waiting` at the instant of its scrape, summed over the pods. At 4 req/s of 1 s
requests the mean is 4 in flight, but a scrape reads 8 or more one time in twenty (Poisson), and one
such reading on a one-replica fleet asks for a second replica (GPU run of issue 38: a reading of 9
decided twenty points of SLO attainment). A seeded replay (`Draws`) therefore

* draws the requests themselves: each tick's arrivals are a Poisson count at the trace's rate, each
  request at a uniform instant in its tick (`arrivals`);
* counts, at every scrape instant, the requests a pod would report: those started within one request
  duration before it (`Sampler.running`: the full ticks of the window exactly, the two partial ticks
  at its ends a binomial draw over their requests' instants), plus the fleet's queue (a count, rounded
  at random);
* splits them over the Ready pods as the router does (`split`): a least-in-flight router keeps the
  pods level (a pod queues only when all are full), a Service sends each request to a pod at random
  (a pod may queue while another has free slots), which only the waiting gauge can tell apart: every
  other served aggregate is a sum, or a mean over pods of a count times a constant;
* serves the value of the last refresh, `lag` late, averaged over the metric's `smoothing` window
  (the mean of the scrapes within it, as the adapter's scrape source and Prometheus's
  `avg_over_time` average them) where the policy sets one.

The scrape's phase within a tick is drawn once per seed. The request duration of the window is the
one at the instant of the scrape (`ServiceModel.duration` of the batch, times the tick's cost): a
request started while the batch was smaller ran a little shorter, which the window ignores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import numpy as np

from lab.backtest.fleet import Router

#: above this many requests a binomial draw is its normal approximation (cheaper, and as good)
_EXACT_BELOW: Final = 40


class Draws:
    """One seed's randomness: arrival counts and instants, the scrape's phase, the router's choices."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.phase = float(self.rng.uniform(1e-9, 1.0))
        """Where in a tick the scrapes fall (a fraction of the tick)."""

    def arrivals(self, amounts: Sequence[float]) -> list[float]:
        """Whole requests per tick: a Poisson count at each tick's expected arrivals."""
        return [float(n) for n in self.rng.poisson(np.maximum(np.asarray(amounts, dtype=float), 0.0))]

    def binomial(self, n: float, p: float) -> float:
        """How many of `n` requests (a fractional `n` rounded at random) fall in a share `p`."""
        if p <= 0.0 or n <= 0.0:
            return 0.0
        whole = self.round(n)
        if p >= 1.0:
            return whole
        if whole < _EXACT_BELOW:
            return float(self.rng.binomial(int(whole), p))
        mean = whole * p
        return float(min(whole, max(0.0, round(self.rng.normal(mean, math.sqrt(mean * (1 - p)))))))

    def round(self, x: float) -> float:
        """`x` rounded up with probability its fractional part: a count whose mean is `x`."""
        low = math.floor(x)
        return float(low + (1 if self.rng.random() < x - low else 0))

    def split(self, inflight: float, ready: int, slots: float, router: Router) -> tuple[float, float]:
        """(running, waiting) summed over `ready` pods holding `inflight` requests between them."""
        if ready <= 0:
            return 0.0, 0.0
        capacity = ready * slots
        if router != "service" or inflight <= slots:
            # Level pods (or too few requests for any pod to be full): queued only beyond every slot.
            running = min(inflight, capacity)
            return running, inflight - running
        counts = self.rng.multinomial(int(inflight), [1.0 / ready] * ready)
        waiting = float(np.maximum(counts - math.floor(slots), 0).sum())
        return inflight - waiting, waiting


class Sampler:
    """The running requests a scrape counts, from the fleet's admissions tick by tick."""

    def __init__(self, draws: Draws, ticks: int) -> None:
        self.draws = draws
        self.admitted = [0.0] * ticks
        self._prefix = [0.0] * (ticks + 1)
        self._cache: dict[int, tuple[float, float] | None] = {}

    def record(self, index: int, admitted: float) -> None:
        """The fleet started `admitted` requests in tick `index` (called once per tick, in order)."""
        self.admitted[index] = admitted
        self._prefix[index + 1] = self._prefix[index] + admitted

    def running(self, seen: int, duration: float) -> float:
        """Requests running at the scrape instant in tick `seen`, each lasting `duration` ticks."""
        draws, admitted = self.draws, self.admitted
        t = seen + draws.phase
        start = t - duration
        if start >= seen:
            # Requests shorter than the scrape's offset into its tick: only that tick's, in the window.
            return draws.binomial(admitted[seen], duration)
        count = draws.binomial(admitted[seen], draws.phase)
        first = max(0, math.ceil(start))
        count += self._prefix[seen] - self._prefix[first]
        if first > 0 and start > -1:
            # The tick the window opens in: its requests started after `start`.
            count += draws.binomial(admitted[first - 1], first - start)
        return draws.round(count) if count != int(count) else count

    def state(
        self, seen: int, duration: float, waiting: float, ready: int, slots: float, router: Router
    ) -> tuple[float, float] | None:
        """(running, waiting) summed over the pods at the scrape in tick `seen`; `None` without a
        Ready pod. Drawn once per tick: a later read of the same scrape sees the same counts."""
        if seen in self._cache:
            return self._cache[seen]
        value: tuple[float, float] | None = None
        if ready > 0:
            inflight = self.running(seen, duration) + self.draws.round(waiting)
            value = self.draws.split(inflight, ready, slots, router)
        self._cache[seen] = value
        return value
