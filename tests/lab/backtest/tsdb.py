"""Recorded vLLM history as a real Prometheus TSDB: OpenMetrics text, then `promtool tsdb create-blocks-from
openmetrics`.

A pod's history is one `Second` per second (what it completed and its gauges then); `pod_series`
turns it into the series vLLM exports, sampled every `scrape` seconds with the real capture's names
and labels, counters starting from the real idle capture's values. A counter reset (the pod
restarted) and a hole (scrapes failed) can be put in, so range queries, step alignment, extrapolation
and resets are Prometheus's own.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

# Copies of shared/data/vllm-0.26.0/ (the real capture), kept in the repository for CI.
REAL: Final = Path(__file__).resolve().parents[2] / "data"
COUNTERS: Final = (
    ("vllm:request_success_total", "completed"),
    ("vllm:prompt_tokens_total", "prompt_tokens"),
    ("vllm:generation_tokens_total", "output_tokens"),
)
GAUGES: Final = (
    ("vllm:num_requests_running", "running"),
    ("vllm:num_requests_waiting", "waiting"),
    ("vllm:kv_cache_usage_perc", "kv"),
)
#: histograms written with their +Inf bucket, sum and count (all the backtest reads)
HISTOGRAMS: Final = (
    ("vllm:time_to_first_token_seconds", "ttft"),
    ("vllm:request_time_per_output_token_seconds", "tpot"),
)


@dataclass(frozen=True)
class Second:
    """One pod during one second."""

    completed: float
    running: float
    waiting: float
    kv: float = 0.0
    ttft: float = 0.02
    """Mean TTFT of the requests completed in that second."""
    tpot: float = 0.003
    prompt_tokens: float = 1000.0
    """Per completed request."""
    output_tokens: float = 288.0


def real_idle() -> tuple[dict[str, str], dict[str, float]]:
    """The labels of the real server's engine series and its counters' values before the load."""
    text = (REAL / "metrics-idle.prom").read_text(encoding="utf-8")
    labels: dict[str, str] = {}
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "vllm:num_requests_running":
                labels = dict(sample.labels)
            if (
                sample.name == "vllm:request_success_total"
                and sample.labels.get("finished_reason") == "length"
            ):
                values["completed"] = sample.value
            elif sample.name in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total"):
                values["prompt_tokens" if "prompt" in sample.name else "output_tokens"] = sample.value
            elif sample.name.endswith(("_seconds_sum", "_seconds_count")) and "time_to_first" in sample.name:
                values["ttft_" + sample.name.rsplit("_", 1)[1]] = sample.value
    return labels, values


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]]


def pod_series(
    seconds: Sequence[Second],
    *,
    start: float,
    labels: dict[str, str],
    base: dict[str, float] | None = None,
    scrape: float = 5.0,
    reset_at: float | None = None,
    hole: tuple[float, float] | None = None,
) -> Samples:
    """The pod's series, one sample per scrape (seconds from `start`), as `{(name, labels): [(t, v)]}`."""
    base = dict(base or {})
    totals = {
        "completed": base.get("completed", 0.0),
        "prompt_tokens": base.get("prompt_tokens", 0.0),
        "output_tokens": base.get("output_tokens", 0.0),
        "ttft_sum": base.get("ttft_sum", 0.0),
        "ttft_count": base.get("ttft_count", 0.0),
        "tpot_sum": 0.0,
        "tpot_count": 0.0,
    }
    out: Samples = {}

    def add(name: str, extra: dict[str, str], t: float, value: float) -> None:
        key = (name, tuple(sorted({**labels, **extra}.items())))
        out.setdefault(key, []).append((start + t, value))

    for index, second in enumerate(seconds):
        if reset_at is not None and index == round(reset_at):
            totals = dict.fromkeys(totals, 0.0)
        done = second.completed
        totals["completed"] += done
        totals["prompt_tokens"] += done * second.prompt_tokens
        totals["output_tokens"] += done * second.output_tokens
        totals["ttft_sum"] += done * second.ttft
        totals["ttft_count"] += done
        totals["tpot_sum"] += done * second.tpot
        totals["tpot_count"] += done
        t = index + 1.0
        if t % scrape or (hole and hole[0] <= t < hole[1]):
            continue
        for name, field in COUNTERS:
            add(name, {"finished_reason": "length"} if "success" in name else {}, t, totals[field])
        for name, field in GAUGES:
            add(name, {}, t, getattr(second, field))
        for name, field in HISTOGRAMS:
            add(name + "_bucket", {"le": "+Inf"}, t, totals[field + "_count"])
            add(name + "_count", {}, t, totals[field + "_count"])
            add(name + "_sum", {}, t, totals[field + "_sum"])
    return out


def _family(name: str) -> tuple[str, str]:
    for family, _ in COUNTERS:
        if name == family:
            return family.removesuffix("_total"), "counter"
    for family, _ in HISTOGRAMS:
        if name.startswith(family):
            return family, "histogram"
    return name, "gauge"


def openmetrics(*pods: Samples) -> str:
    """OpenMetrics text of every pod's series, grouped by family, each series in time order."""
    merged: Samples = {}
    for pod in pods:
        for key, points in pod.items():
            merged.setdefault(key, []).extend(points)
    families: dict[tuple[str, str], list[str]] = {}
    for (name, labels), points in sorted(merged.items()):
        label_text = ",".join(f'{k}="{v}"' for k, v in labels)
        lines = families.setdefault(_family(name), [])
        lines.extend(f"{name}{{{label_text}}} {_number(v)} {t:.3f}" for t, v in sorted(points))
    text: list[str] = []
    for (family, kind), lines in families.items():
        text.append(f"# TYPE {family} {kind}")
        text.extend(lines)
    return "\n".join([*text, "# EOF", ""])


def _number(value: float) -> str:
    return repr(float(value)) if math.isfinite(value) else "NaN"


def create_blocks(text: str, data_dir: Path, promtool: str) -> None:
    """Write the OpenMetrics text into TSDB blocks in `data_dir` (Prometheus's `--storage.tsdb.path`)."""
    source = data_dir.parent / "history.om"
    data_dir.mkdir(parents=True, exist_ok=True)
    source.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def stage_seconds(rows: Iterable[dict[str, str]]) -> list[Second]:
    """The real capture's stage table as seconds of one pod (the queue as `lab.backtest.inputs.stages` infers
    it)."""
    from lab.backtest.inputs.stages import stage_history

    history = stage_history(list(rows), source="load-stages.csv")
    assert history.completions and history.running and history.waiting and history.kv_usage
    seconds = []
    for i in range(len(history.arrivals)):
        ttft = history.ttft_mean[i] if history.ttft_mean else math.nan
        tpot = history.tpot_mean[i] if history.tpot_mean else math.nan
        prompt = history.prompt_tokens[i] if history.prompt_tokens else math.nan
        output = history.output_tokens[i] if history.output_tokens else math.nan
        seconds.append(
            Second(
                completed=history.completions[i],
                running=history.running[i],
                waiting=history.waiting[i],
                kv=history.kv_usage[i],
                ttft=0.0 if math.isnan(ttft) else ttft,
                tpot=0.0 if math.isnan(tpot) else tpot,
                prompt_tokens=0.0 if math.isnan(prompt) else prompt,
                output_tokens=0.0 if math.isnan(output) else output,
            )
        )
    return seconds
