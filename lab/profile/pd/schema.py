"""The P/D section of a profile file: what `vllm-autoscale profile --pd` measured about a prefill-decode pair.

It lives under the key `pd` of `profile.json`: beside an aggregated profile of the same pair (whose
reader, `lab.profile.schema.load`, ignores the key), or alone (`{"schema_version": 1, "pd": {...}}`).
Plain JSON numbers only (`allow_nan=False`: no Infinity or NaN). Where its fields go:

* `prefill.throughput_tokens_per_second` -> the adapter's
  `metrics.vllm_prefill_backlog_seconds.prefill_throughput`, the chart's
  `models[].disaggregation.prefillThroughput`;
* `prefill_targets` / `decode_targets` -> each pool's HPA (`disaggregation.prefill.autoscaling.metrics`,
  `disaggregation.decode.autoscaling.metrics`);
* `ratio` -> the pools' sizes relative to each other (their min replicas, and a joint unit);
* the rest -> `vllm-autoscale backtest --disaggregated` (the pair's service model).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from lab import json_out
from lab.profile.schema import SCHEMA_VERSION, MetricTarget, ProfileError, _build

SECTION: Final = "pd"


@dataclass(frozen=True)
class PrefillRole:
    """The prefill engine, measured through the P/D path (requests sent to the pair's entry point)."""

    throughput_tokens_per_second: float
    """Prompt tokens per second the prefill engine computed at the highest level (its queue standing)."""
    saturated: bool
    """Whether the prefill engine's queue stood at that level: the throughput is then its capacity;
    otherwise a lower bound."""
    alone_seconds: float
    """A prompt's prefill alone: the prefill engine's mean TTFT with one client."""
    slots: float
    """Most requests the prefill engine ran at once (mean over a level)."""
    levels: tuple[tuple[float, float, float], ...] = ()
    """(clients, prompt tokens/s, mean waiting on the prefill engine) per level."""


@dataclass(frozen=True)
class DecodeRole:
    """The decode engine: how its step grows with the batch, and its knee for the TPOT objective."""

    tpot_base_seconds: float
    tpot_per_request_seconds: float
    """TPOT = base + per_request x running, fitted over the levels."""
    knee_running: float
    """Running requests per decode pod at the knee: the most with TPOT within the SLO, no more than
    the engine ran without a queue standing."""
    knee_tpot_seconds: float
    knee_bound: str
    """What set the knee: `tpot` (the objective), `slots` (the batch the engine held), or `levels`
    (the highest level measured: the knee is at least this)."""
    kv_per_request: float
    """KV-cache usage one running request adds (0-1)."""
    slots: float
    """Most requests the decode engine ran at once (mean over a level)."""
    levels: tuple[tuple[float, float, float, float], ...] = ()
    """(clients, mean running, mean TPOT seconds, mean KV usage) per level."""


@dataclass(frozen=True)
class PdProfile:
    """A P/D pair's profile and its recommendations."""

    url: str
    prefill_url: str
    decode_url: str
    prompt_tokens: float
    output_tokens: float
    slo_ttft_seconds: float
    slo_tpot_seconds: float
    prefill: PrefillRole
    decode: DecodeRole
    handover_seconds: float
    """The KV hand-over: the decode engine's mean TTFT (from the request's arrival there to its first
    token) less one decode step (its mean TPOT), with one client."""
    unloaded_ttft_seconds: float
    """A client's mean TTFT through the pair with one client: prefill, hand-over, one decode step."""
    prefill_per_decode: float
    """Prefill pods per decode pod this workload needs: prompt tokens x a decode pod's request rate at
    its knee / a prefill pod's throughput."""
    ratio: tuple[int, int]
    """The smallest whole P:D near `prefill_per_decode` (within 10 %, denominators up to 8)."""
    prefill_targets: dict[str, MetricTarget]
    decode_targets: dict[str, MetricTarget]
    notes: tuple[str, ...] = field(default_factory=tuple)


def to_json(pd: PdProfile) -> dict[str, Any]:
    """The section as plain data."""
    return dataclasses.asdict(pd)


def write(pd: PdProfile, path: Path) -> None:
    """Put the section into `path` (`profile.json`): beside what the file holds, or in a new file."""
    document: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    if path.exists():
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ProfileError(f"unable to read profile {path} to add the P/D section: {exc}") from exc
        if isinstance(found, dict):
            document = found
    document[SECTION] = to_json(pd)
    path.write_text(json_out.text(document), encoding="utf-8")


def load(path: Path) -> PdProfile:
    """The P/D section of a profile file; `ProfileError` naming the file and field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProfileError(f"unable to read profile {path}: {exc}") from exc
    if not isinstance(data, dict) or SECTION not in data:
        raise ProfileError(
            f"profile {path} has no {SECTION!r} section (measure the pair with `vllm-autoscale profile --pd`)"
        )
    pd: PdProfile = _build(PdProfile, data[SECTION], f"{path}.{SECTION}")
    return pd
