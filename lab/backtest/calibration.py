"""One replica's service model, and where its numbers come from: a profile, the recorded data, or a flag.

The fleet model (`lab.backtest.fleet`) needs:

* **capacity**: requests per second one replica completes when saturated, with an uncertainty band;
* **slots**: requests one replica runs at once when saturated (the KV cache or `--max-num-seqs`);
* **shape**: how a request's duration grows with the batch, `d(b) ∝ shape + b` (Little's law on
  the unsaturated steps: d = running / throughput; TPOT grows linearly with the batch, vllm-metrics.md §8);
* **ttft_base** (TTFT without a queue) and **ttft_slope** (what each running request adds to it: a
  new request waits for the batch's current step and its prefill shares the next one, both longer
  with a bigger batch), **output_tokens** (the mean, so TPOT = d(b) / tokens) and
  **kv_per_request** (KV usage one running request adds).

The fit from recorded data reads capacity where it shows: throughput per replica in the steps where
the queue grew (the servers were then working as fast as they could). Where a number cannot be
known from the input, the default comes from the real vLLM 0.26.0 run (`shared/data/vllm-0.26.0/`),
scaled to the capacity, and the method says so.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Final

from lab.backtest.history import History, HistoryError
from lab.sizing import KNEE_SHARE
from lab.stats import percentile

# From load-stages.csv of the real run: d(b) = running / completed over the unsaturated stages fits
# 0.375 s + 19.3 ms × b, so shape = 0.375 / 0.0193; the KV cache bounded the batch at ~27 running;
# TTFT unloaded was 17 ms against d(27) = 0.92 s; KV usage was ~0.036 per running request.
REAL_SHAPE: Final = 19.4
REAL_SLOTS: Final = 27.0
REAL_TTFT_FRACTION: Final = 0.018
REAL_OUTPUT_TOKENS: Final = 288.0
REAL_KV_PER_REQUEST: Final = 0.036
_MIN_SAMPLES: Final = 3
# A step counts as saturated when its queue grew by at least this share of its completions.
GROWTH_SHARE: Final = 0.05


class CalibrationError(HistoryError):
    """Capacity cannot be known from what was given; the message says what to pass instead."""


@dataclass(frozen=True)
class Estimate:
    """A number with its plausible range and how it was obtained."""

    value: float
    low: float
    high: float
    method: str

    def text(self, unit: str) -> str:
        """`31.2 req/s (28.8-33.4): fitted from ...`."""
        band = "" if self.low == self.high == self.value else f" ({self.low:.3g}-{self.high:.3g})"
        return f"{self.value:.3g} {unit}{band}: {self.method}"


@dataclass(frozen=True)
class ServiceModel:
    """One replica, as the fleet model serves requests."""

    capacity: float
    """Requests per second at saturation."""
    slots: float
    """Requests running at once at saturation."""
    shape: float = REAL_SHAPE
    ttft_base: float = 0.0
    output_tokens: float = REAL_OUTPUT_TOKENS
    kv_per_request: float = REAL_KV_PER_REQUEST
    ttft_slope: float = 0.0
    """Seconds of TTFT each running request on the replica adds (0: TTFT does not grow with the batch)."""

    def __post_init__(self) -> None:
        if not (self.capacity > 0 and self.slots > 0 and self.shape >= 0 and self.output_tokens > 0):
            raise CalibrationError(f"service model {self!r} must have positive capacity, slots and tokens")

    @property
    def saturated_duration(self) -> float:
        """Seconds a request takes in a full batch (Little's law: slots / capacity)."""
        return self.slots / self.capacity

    def duration(self, batch: float) -> float:
        """Seconds a request takes when `batch` requests run on its replica. (`Fleet.tick` unrolls this
        and `batch_at` for speed: change them together.)"""
        return self.saturated_duration * (self.shape + batch) / (self.shape + self.slots)

    def ttft(self, batch: float) -> float:
        """TTFT without a queue when `batch` requests run on the replica."""
        return self.ttft_base + self.ttft_slope * batch

    def tpot(self, batch: float) -> float:
        """Mean time per output token at that batch."""
        return self.duration(batch) / self.output_tokens

    def batch_at(self, rate: float) -> float:
        """The batch a replica runs while taking `rate` requests per second (`b = rate × d(b)`);
        a full batch at or beyond capacity."""
        if rate >= self.capacity:
            return self.slots
        # d(b) = k (shape + b)  =>  b = rate × k × shape / (1 - rate × k)
        k = self.saturated_duration / (self.shape + self.slots)
        return rate * k * self.shape / (1 - rate * k)

    def knee_inflight(self) -> float:
        """In-flight requests per replica where throughput is `KNEE_SHARE` of capacity."""
        return self.batch_at(KNEE_SHARE * self.capacity)

    def knee_rate(self, slo_tpot: float) -> float:
        """Requests per second one replica takes at the knee for the SLO: at most `KNEE_SHARE` of
        capacity (a stable queue) and no more than keeps the batch's TPOT within `slo_tpot`
        (the batch grows with the rate, and TPOT with the batch). A TPOT the replica misses even
        alone leaves the queue bound: no fleet size helps then."""
        share = KNEE_SHARE * self.capacity
        k = self.saturated_duration / (self.shape + self.slots)
        # tpot(b) = k (shape + b) / tokens <= slo  =>  b <= slo tokens / k - shape; the fleet model
        # judges TPOT on the batch rounded to a quarter request, hence the quarter's margin.
        batch = slo_tpot * self.output_tokens / k - self.shape - 0.25
        if batch >= self.slots or batch <= 0:
            return share
        return min(share, batch / self.duration(batch))

    def with_capacity(self, capacity: float) -> ServiceModel:
        """The same replica at another capacity (the slots stay: the duration scales)."""
        return replace(self, capacity=capacity)


@dataclass(frozen=True)
class Calibration:
    """The service model, the capacity's uncertainty, and the method behind every number."""

    model: ServiceModel
    capacity: Estimate
    methods: dict[str, str]
    saturation: dict[str, float] = field(default_factory=dict)
    """`vllm_saturation` parameters a profile measured (`capacity`, `kv_target`, `queue_target`)."""
    knee: float | None = None
    """Requests per second one replica held the profile's SLO at (`Profile.knee`); `None`: the model's."""

    def knee_rate(self, slo_tpot: float) -> tuple[float, str]:
        """Per-replica requests per second at the knee for the SLO, and where the number comes from."""
        if self.knee is not None:
            return self.knee, "the profile's knee (the highest rate that held its SLO)"
        rate = self.model.knee_rate(slo_tpot)
        bound = "TPOT" if rate < KNEE_SHARE * self.model.capacity - 1e-9 else "queue"
        why = {
            "TPOT": f"the capacity model: the most a replica takes with TPOT <= {slo_tpot * 1000:g} ms",
            "queue": f"the capacity model: {KNEE_SHARE:g} x capacity (TPOT holds up to a full batch)",
        }
        return rate, why[bound]

    def lines(self) -> list[str]:
        """What is printed and recorded."""
        m = self.model
        return [
            f"capacity        {self.capacity.text('req/s per replica')}",
            f"slots           {m.slots:.3g} running per replica at saturation: {self.methods['slots']}",
            f"request time    {m.duration(0):.3g} s alone, "
            f"{m.saturated_duration:.3g} s in a full batch: {self.methods['shape']}",
            f"TTFT unloaded   {m.ttft_base * 1000:.3g} ms (+{m.ttft_slope * 1000:.3g} ms per running "
            f"request): {self.methods['ttft_base']}",
            f"KV per request  {m.kv_per_request:.3g}: {self.methods['kv_per_request']}",
        ]


def defaults(capacity: float, slots: float | None = None) -> ServiceModel:
    slots = slots or REAL_SLOTS
    base = ServiceModel(capacity, slots)
    return replace(
        base, ttft_base=REAL_TTFT_FRACTION * base.saturated_duration, kv_per_request=1.0 / (slots + 1)
    )


def given(capacity: float, slots: float | None = None) -> Calibration:
    """A capacity given on the command line; the shape is the real run's."""
    model = defaults(capacity, slots)
    real = "the real vLLM 0.26.0 run's, scaled to the capacity"
    return Calibration(
        model,
        Estimate(capacity, capacity, capacity, "given with --capacity (no uncertainty known)"),
        {"slots": "given" if slots else real, "shape": real, "ttft_base": real, "kv_per_request": real},
    )


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(intercept, slope) of y = a + b x by least squares, both at least 0; `None` with fewer than
    three points or a single x."""
    if len(points) < _MIN_SAMPLES or len({round(x, 3) for x, _ in points}) < 2:
        return None
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    var = sum((x - mean_x) ** 2 for x, _ in points)
    slope = max(0.0, sum((x - mean_x) * (y - mean_y) for x, y in points) / var)
    return max(0.0, mean_y - slope * mean_x), slope


def fit_shape(points: list[tuple[float, float]]) -> float | None:
    """`shape` of d(b) = k (shape + b) by least squares over (batch, duration); `None` if it does not fit."""
    if len(points) < _MIN_SAMPLES or len({round(b, 3) for b, _ in points}) < 2:
        return None
    mean_b = statistics.fmean(b for b, _ in points)
    mean_d = statistics.fmean(d for _, d in points)
    var = sum((b - mean_b) ** 2 for b, _ in points)
    slope = sum((b - mean_b) * (d - mean_d) for b, d in points) / var
    intercept = mean_d - slope * mean_b
    if slope <= 0 or intercept <= 0:
        return None
    return intercept / slope


def fit(history: History) -> Calibration:
    """The service model fitted from recorded fleet series (Prometheus, or a demo CSV)."""
    needed = ("completions", "waiting", "running", "replicas")
    absent = [name for name in needed if not history.known(name)]
    if absent:
        raise CalibrationError(
            f"capacity cannot be fitted from {history.source}: it records no {absent[0]} "
            "(pass --profile FILE or --capacity RPS)"
        )
    assert history.completions and history.waiting and history.running and history.replicas
    growing: list[float] = []
    batches: list[float] = []
    little: list[tuple[float, float]] = []
    kv: list[float] = []
    ttft: list[float] = []
    for i in range(1, len(history.arrivals)):
        done, replicas = history.completions[i], history.replicas[i]
        running, waiting, before = history.running[i], history.waiting[i], history.waiting[i - 1]
        if any(math.isnan(v) for v in (done, replicas, running, waiting, before)) or replicas <= 0:
            continue
        per_replica = running / replicas
        rate = done / history.step / replicas
        # The queue grew by a clear share of the throughput: the offered load was above what the
        # replicas served, so they served as fast as they could.
        if waiting - before > GROWTH_SHARE * done and waiting > 0:
            growing.append(rate)
            batches.append(per_replica)
        elif waiting == 0 and rate > 0 and per_replica > 0:
            little.append((per_replica, per_replica / rate))
            if history.ttft_mean and not math.isnan(history.ttft_mean[i]):
                ttft.append(history.ttft_mean[i])
        if (
            history.kv_usage
            and per_replica > 0
            and not math.isnan(history.kv_usage[i])
            and history.kv_usage[i] < 0.95
        ):
            kv.append(history.kv_usage[i] / per_replica)
    if len(growing) < _MIN_SAMPLES:
        raise CalibrationError(
            f"capacity cannot be fitted from {history.source}: the queue grew in {len(growing)} steps "
            f"(need {_MIN_SAMPLES}); pass --profile FILE or --capacity RPS"
        )
    capacity = Estimate(
        statistics.median(growing),
        percentile(growing, 0.1),
        percentile(growing, 0.9),
        "fitted: median throughput per replica over "
        f"{len(growing)} steps with a growing queue (p10-p90 band)",
    )
    slots = percentile(batches, 0.9)
    model = defaults(capacity.value, slots)
    shape = fit_shape(little)
    tokens = [v for v in history.output_tokens or () if not math.isnan(v) and v > 0]
    model = replace(
        model,
        shape=shape or model.shape,
        ttft_base=statistics.median(ttft) if ttft else model.ttft_base,
        output_tokens=statistics.fmean(tokens) if tokens else model.output_tokens,
        kv_per_request=statistics.median(kv) if kv else model.kv_per_request,
    )
    methods = {
        "slots": "fitted: p90 of running per replica while the queue grew",
        "shape": f"fitted: Little's law over {len(little)} steps without a queue"
        if shape
        else "the real vLLM 0.26.0 run's",
        "ttft_base": f"fitted: median TTFT of {len(ttft)} steps without a queue"
        if ttft
        else "the real run's, scaled",
        "kv_per_request": "fitted: KV usage per running request" if kv else "1 / (slots + 1)",
    }
    return Calibration(model, capacity, methods)
