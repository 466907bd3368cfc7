"""What a demo run records: the fleet at each tick, and each request's fate (emulated seconds).

A value nobody can know at a tick (the queue while no replica is Ready, a p90 without requests) is
`None`: an empty CSV cell, a break in the plotted line, and left out of the summary, never a zero.

The CSV holds one row per tick; its columns (`CSV_COLUMNS`) are the fields named with their unit,
so a reader never has to guess seconds from milliseconds or a fleet total from a per-replica value.
The stretches the picture marks (stages, cold starts) and the upstream-queue series are read from the
ticks here too, without matplotlib.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

RequestFate = Literal["ok", "rejected", "aborted"]


# kw_only: the fields are always passed by name, so optional ones can be added anywhere.
@dataclass(frozen=True, kw_only=True)
class Tick:
    """The fleet at one tick of the run (emulated time)."""

    t: float
    """Seconds since the load started."""
    stage: str
    offered_rps: float
    """What the profile asks for at `t` (requests per second)."""
    sent_rps: float
    """Requests actually sent since the previous tick, per second (Poisson noise around `offered_rps`)."""
    completed_rps: float
    waiting: int | None
    """Σ `vllm:num_requests_waiting` over serving replicas;
    `None` while none is Ready (nothing reports it)."""
    running: int | None
    """Σ `vllm:num_requests_running` over serving replicas; `None` while none is Ready."""
    kv_usage: float | None
    """Mean `vllm:kv_cache_usage_perc` over serving replicas (0-1); `None` while none is Ready."""
    tpot_p90: float | None
    """p90 of per-request TPOT (seconds) over requests finished in the last window; `None` without any."""
    ttft_p90: float | None
    """p90 of TTFT (seconds) over requests finished in the last window; `None` without any."""
    metric: float | None
    """The External metric the HPA last read: the fleet total (sum of
    the items, in the metric's unit); `None` when the read failed."""
    desired: int
    """`spec.replicas` after the HPA's last sync."""
    ready: int
    """Replicas passing `/health`."""
    replicas: int
    """Replicas that exist, loading or serving (`status.replicas`)."""
    tpot_mean: float | None = None
    """Mean per-request TPOT (seconds) over requests finished in the last window: the statistic the
    adapter's `vllm_tpot_seconds` serves (`rate(_sum) / rate(_count)`); `None` without any."""
    metric_per_replica: float | None = None
    """For an AverageValue target, what the HPA compared with it at its last sync (`status.currentMetrics`):
    the total divided by the replicas that existed then, loading ones included; `None` for a Value target
    or when unknown."""
    metric_target: float | None = None
    """The target of the HPA's first metric, in the unit of `metric` (for a rate, per second of the
    cluster's clock, as `t` is); `None` in a CSV from before it was recorded."""
    queue_depth: int | None = None
    """Visible messages in the upstream queue (what the exporter reports as
    `aws_sqs_approximate_number_of_messages_visible_average`); `None` for a run without a queue."""
    dlq_depth: int | None = None
    """Visible messages in the queue's dead-letter queue; `None` for a run without a queue."""
    consumers: int | None = None
    """Queue consumers pulling (one per Ready replica; a
    draining one is not counted); `None` without a queue."""
    messages_lost: int | None = None
    """Messages sent to the queue that are nowhere (not waiting, in flight, done or dead-lettered): 0 unless
    something lost one; `None` without a queue."""

    @property
    def loading(self) -> int:
        """Replicas that exist but are not Ready yet (in their cold start)."""
        return max(0, self.replicas - self.ready)


def per_replica(tick: Tick) -> float | None:
    """The per-replica value the HPA compared with an AverageValue target: `metric_per_replica` when
    recorded, else the total over the replicas existing at the tick (which lags the HPA's count by up to
    one sync after a rescale); `None` when the metric is unknown."""
    if tick.metric_per_replica is not None:
        return tick.metric_per_replica
    return None if tick.metric is None else tick.metric / max(tick.replicas, 1)


#: The upstream queue's message counts a `Tick` may carry, with their legend labels.
MESSAGE_FIELDS: Final = {
    "queue_depth": "upstream queue",
    "dlq_depth": "dead-letter queue",
    "messages_lost": "lost",
}


def queue_series(ticks: Sequence[Tick]) -> dict[str, list[int | None]]:
    """The queue's message counts by legend label, each only when the
    run recorded it; empty for a run without an upstream queue."""
    series: dict[str, list[int | None]] = {}
    for name, label in MESSAGE_FIELDS.items():
        values: list[int | None] = [getattr(s, name) for s in ticks]
        if any(v is not None for v in values):
            series[label] = values
    return series


def stage_spans(ticks: Sequence[Tick]) -> list[tuple[str, float, float]]:
    """(stage, first t, end t) for each run of ticks in one stage; a stage ends where the next begins."""
    spans: list[tuple[str, float, float]] = []
    for tick in ticks:
        if spans and spans[-1][0] == tick.stage:
            spans[-1] = (tick.stage, spans[-1][1], tick.t)
        else:
            if spans:
                spans[-1] = (spans[-1][0], spans[-1][1], tick.t)
            spans.append((tick.stage, tick.t, tick.t))
    return spans


def cold_starts(ticks: Sequence[Tick]) -> list[tuple[float, float]]:
    """(begin, end) of each stretch in which some replica was loading,
    held from tick to tick as the replica panel's steps are."""
    spans: list[tuple[float, float]] = []
    for tick, after in zip(ticks, [*ticks[1:], None], strict=True):
        if tick.loading == 0:
            continue
        end = tick.t if after is None else after.t
        if spans and spans[-1][1] == tick.t:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((tick.t, end))
    return spans


#: The CSV column of each `Tick` field: its name with the unit (a field not listed keeps its name, and
#: `test_records` asks for its unit).
CSV_COLUMNS: Final[Mapping[str, str]] = {
    "t": "t_seconds",
    "stage": "stage",
    "offered_rps": "offered_requests_per_second",
    "sent_rps": "sent_requests_per_second",
    "completed_rps": "completed_requests_per_second",
    "waiting": "waiting_requests",
    "running": "running_requests",
    "kv_usage": "kv_usage_fraction",
    "tpot_p90": "tpot_p90_seconds",
    "ttft_p90": "ttft_p90_seconds",
    "tpot_mean": "tpot_mean_seconds",
    "metric": "metric_total",
    "metric_per_replica": "metric_per_replica",
    "metric_target": "metric_target",
    "desired": "desired_replicas",
    "ready": "ready_replicas",
    "replicas": "existing_replicas",
    "queue_depth": "queue_depth_messages",
    "dlq_depth": "dlq_depth_messages",
    "consumers": "queue_consumers",
    "messages_lost": "lost_messages",
}


def csv_header() -> list[str]:
    """The CSV's column names, in the order of `Tick`'s fields."""
    return [CSV_COLUMNS.get(f.name, f.name) for f in dataclasses.fields(Tick)]


def to_row(tick: Tick) -> list[str]:
    """One CSV row: empty cells for unknown values, floats to 6 significant digits."""
    cells = []
    for field in dataclasses.fields(Tick):
        value = getattr(tick, field.name)
        cells.append("" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value))
    return cells


def from_row(row: Mapping[str, str]) -> Tick:
    """The `Tick` of a CSV row keyed by column name; a missing optional column reads as unknown."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(Tick):
        column = CSV_COLUMNS.get(field.name, field.name)
        cell = row.get(column)
        if cell is None:
            if field.default is dataclasses.MISSING:
                raise ValueError(f"CSV has no column {column!r} (for Tick.{field.name})")
            continue
        kind = str(field.type)
        if kind == "str":
            values[field.name] = cell
        elif cell == "":
            values[field.name] = None
        else:
            values[field.name] = int(cell) if kind.startswith("int") else float(cell)
    return Tick(**values)


@dataclass(frozen=True)
class RequestRecord:
    """One request's fate, in emulated seconds."""

    sent: float
    outcome: RequestFate
    """`ok`, `rejected` (no serving replica or a 503), or `aborted` (its replica went away)."""
    ttft: float | None = None
    tpot: float | None = None
