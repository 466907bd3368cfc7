"""The profile file: what `vllm-autoscale profile` measured about one vLLM replica (versioned JSON).

The profile is the contract between the decision lab's parts: `profile` writes it, `emulate
--profile` turns it into an emulated twin, `backtest` reads a replica's capacity from it, and
`vllm_saturation` takes its knee. Fields are plain data (seconds, requests per second, fractions);
`load` refuses a file of another schema version or with a missing field, naming it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from lab import json_out
from lab.load.server import Server
from lab.load.workload import Workload

SCHEMA_VERSION: Final = 1


class ProfileError(ValueError):
    """A profile file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class PercentileSlo:
    """Latency objectives, met when the percentile of each is at or below its bound."""

    ttft_seconds: float
    tpot_seconds: float
    percentile: float = 0.9


@dataclass(frozen=True)
class Estimate:
    """A value measured over a window, with its ~95 % interval (from batch means: see
    `lab.profile.verdict`)."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class Step:
    """One steady step of open-loop Poisson load at `offered_rate` (or one concurrency level)."""

    offered_rate: float
    """Requests per second sent (Poisson); for a concurrency step, the achieved rate."""
    achieved_rate: float
    """Requests per second completed during the measured part of the step."""
    concurrency: float
    """Mean requests in flight at the server (running + waiting) during the step."""
    running: float
    waiting: float
    kv_usage: float
    """Mean `vllm:kv_cache_usage_perc` (0-1)."""
    preemptions: float
    """Preemptions during the step."""
    ttft_seconds: dict[str, float]
    """Client-side TTFT percentiles by name (`p50`, `p90`, `p99`)."""
    tpot_seconds: dict[str, float]
    e2e_seconds: dict[str, float]
    server_ttft_seconds: float | None
    """The server's own TTFT at the SLO percentile (its histogram), to cross-check the client's."""
    server_tpot_seconds: float | None
    """The server's mean TPOT (Δsum/Δcount), as the adapter serves it."""
    requests: int
    queue_stable: bool
    """Whether the waiting queue stayed bounded (no sustained growth) during the step."""
    slo_met: bool
    kind: Literal["rate", "concurrency"] = "rate"
    server_ttft_mean_seconds: float | None = None
    """The server's mean TTFT (Δsum/Δcount of its histogram): exact where its quantile is coarse."""
    errors: int = 0
    """Requests of the step that failed (refused, reset); each counts as missing the SLO."""
    clients: int | None = None
    """The closed-loop clients of a concurrency step."""
    generation_tokens_per_second: float | None = None
    """Tokens the server generated per second (Δ`vllm:generation_tokens_total`): smooth where
    completions come in lumps, so the saturated throughput is read from it."""
    window_seconds: float | None = None
    """The measured window (settled to end), in the server's seconds."""
    ttft_miss: Estimate | None = None
    """Share of the window's requests whose TTFT exceeded the SLO (the SLO holds while it is at most
    1 - percentile), with its interval."""
    tpot_miss: Estimate | None = None
    ttft_interval: tuple[float, float] | None = None
    """The client TTFT at the SLO percentile: the interval the window's statistics allow."""
    waiting_slope: Estimate | None = None
    """The server's waiting queue: its trend in requests per second over the window, with its interval."""
    completion_ratio: float | None = None
    """Requests completed over requests offered in the window (a growing backlog keeps it below 1)."""
    verdict: Literal["held", "failed", "undecided"] | None = None
    """`held`/`failed` when the window's intervals sit on one side of every bound, else `undecided`
    (the profile measures longer); `None` in files from before verdicts."""
    marginal: bool = False
    """Still undecided at the longest window: `held` and `failed` then follow the point estimates."""


@dataclass(frozen=True)
class Knee:
    """The highest offered rate that held the SLO with a stable queue, and the state there."""

    rate: float
    concurrency: float
    kv_usage: float
    ttft_seconds: float
    tpot_seconds: float
    failed_rate: float | None = None
    """The lowest offered rate that did not hold: the knee lies in [`rate`, `failed_rate`)."""
    measurements: int = 1
    """How many steps measured the knee's rate (the repeat from idle included)."""
    model: str | None = None
    """Where the knee is a model's (`lab.profile.twin.model`: open-loop steps could not decide one within
    the budget), how it was found; `rate` and `failed_rate` are then its band."""


@dataclass(frozen=True)
class MetricTarget:
    """A recommended HPA target for one catalogue metric, with the reasoning behind it."""

    type: Literal["AverageValue", "Value"]
    value: float
    reasoning: str


@dataclass(frozen=True)
class Profile:
    """Everything one profiling run learned; `complete` is false for a partial profile (saved on
    an error or an exhausted budget), which never carries a made-up knee."""

    server: Server
    workload: Workload
    slo: PercentileSlo
    steps: tuple[Step, ...]
    knee: Knee | None
    tpot_vs_batch: tuple[tuple[float, float], ...]
    """(running requests, TPOT seconds) points: how decoding slows as the batch grows."""
    prefill_seconds_per_token: float | None
    targets: dict[str, MetricTarget]
    """Recommended target per catalogue metric name (inflight, waiting, KV, saturation)."""
    complete: bool
    error: str | None = None
    cold_start_seconds: float | None = None
    """Time from launch to ready, when `profile --launch` started the server."""
    schema_version: int = SCHEMA_VERSION
    notes: tuple[str, ...] = field(default_factory=tuple)
    saturated_rate: float | None = None
    """Requests per second the server completed with a standing queue (the concurrency sweep's top):
    its throughput capacity for this workload; open-loop rates above it cannot keep a stable queue."""
    saturation: dict[str, float] = field(default_factory=dict)
    """The `vllm_saturation` parameters this profile implies (`capacity`, `kv_target`, `queue_target`)."""
    no_target: dict[str, str] = field(default_factory=dict)
    """Catalogue metrics given no target, with the reason (one that does not rise with load)."""
    checks: tuple[str, ...] = field(default_factory=tuple)
    """The profile's checks of itself: the repeat at the knee, client against server TTFT,
    open-loop against closed-loop saturation; each line says what it compared and whether it agreed."""
    saturated_interval: tuple[float, float] | None = None
    """The spread of the saturated throughput across the closed-loop steps it was fitted from."""
    prefill_interval: tuple[float, float] | None = None
    """The 95 % interval of the prefill probe's slope (seconds per prompt token); when it holds 0,
    `prefill_seconds_per_token` is `None`: the probe did not resolve it."""
    prefill_probe: tuple[tuple[float, float], ...] = ()
    """(prompt tokens, TTFT seconds: the server's mean for the burst, else the client's last) of each
    prefill probe burst, in the order sent; the first round (one burst per size) is not fitted."""


def dump(profile: Profile, path: Path) -> None:
    """Write `profile` as indented, standard JSON (stable key order, so files diff well): an unbounded
    number is `null` (`lab.json_out`), which `load` reads back as unbounded."""
    path.write_text(json_out.text(dataclasses.asdict(profile)), encoding="utf-8")


def load(path: Path) -> Profile:
    """Read a profile file; `ProfileError` naming the file and field when it does not fit."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProfileError(f"unable to read profile {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        found = data.get("schema_version") if isinstance(data, dict) else None
        raise ProfileError(
            f"profile {path} has schema_version {found!r}; this version reads {SCHEMA_VERSION}"
        )
    profile: Profile = _build(Profile, data, f"{path}")
    return profile


def step_from(data: Any, where: str) -> Step:
    """One step from its JSON object (as `dump` writes it); `ProfileError` naming `where` and the field."""
    step: Step = _build(Step, data, where)
    return step


def _build(cls: Any, data: Any, where: str) -> Any:
    hints = typing.get_type_hints(cls)
    if not isinstance(data, dict):
        raise ProfileError(f"{where} must be an object")
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ProfileError(f"{where}: field {f.name!r} is missing")
            continue
        values[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}")
    return cls(**values)


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, where)
    if value is None:
        # `null` where a number is never optional is an unbounded one (`dump` writes ±inf so): -inf at
        # an estimate's `low`, +inf elsewhere (a percentile beyond every finished request, an interval
        # with no upper bound). Files from before wrote `Infinity`, which `json` reads as it is.
        return (-math.inf if where.endswith(".low") else math.inf) if tp is float else None
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise ProfileError(f"{where} must be a list")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        return tuple(
            _convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True))
        )
    if origin is dict:
        if not isinstance(value, dict):
            raise ProfileError(f"{where} must be an object")
        return {k: _convert(args[1], v, f"{where}.{k}") for k, v in value.items()}
    return value
