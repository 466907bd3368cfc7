"""A profile's run as traffic: the load `vllm-autoscale profile` offered one replica, step by step.

A profile file records each step's offered rate, what the server completed and its means (running,
waiting, KV usage, TTFT, TPOT), not a timeline; on a 1 s grid each step lasts as long as its
requests took to send (`requests / offered_rate`), in the order the profile ran them. A step whose
queue did not stay stable gets a queue that grows by (offered - completed) per second around its
recorded mean, so a capacity fit sees where the replica was saturated. Token shapes are the
workload's means.
"""

from __future__ import annotations

import math
from pathlib import Path

from lab.backtest.history import History, HistoryError
from lab.profile.schema import Profile, ProfileError, load


def is_profile(path: Path) -> bool:
    """Whether `path` names a profile file (JSON) rather than a CSV trace."""
    return path.suffix.lower() == ".json"


def profile_history(path: Path) -> History:
    """The profile in `path` as a history; `HistoryError` naming the file when it has no load."""
    try:
        profile: Profile = load(path)
    except ProfileError as exc:
        raise HistoryError(str(exc)) from exc
    series: dict[str, list[float]] = {
        name: [] for name in ("arrivals", "completions", "running", "waiting", "kv", "ttft", "tpot")
    }
    for step in profile.steps:
        if step.offered_rate <= 0 or step.requests <= 0:
            continue
        seconds = max(1, round(step.requests / step.offered_rate))
        growth = 0.0 if step.queue_stable else max(0.0, step.offered_rate - step.achieved_rate)
        for second in range(seconds):
            series["arrivals"].append(step.offered_rate)
            series["completions"].append(step.achieved_rate)
            series["running"].append(step.running)
            series["waiting"].append(max(0.0, step.waiting + growth * (second - seconds / 2)))
            series["kv"].append(step.kv_usage)
            ttft = step.server_ttft_mean_seconds
            series["ttft"].append(math.nan if ttft is None else ttft)
            series["tpot"].append(math.nan if step.server_tpot_seconds is None else step.server_tpot_seconds)
    if not series["arrivals"]:
        raise HistoryError(f"profile {path} has no step with offered load to replay")
    n = len(series["arrivals"])
    workload = profile.workload
    return History(
        step=1.0,
        arrivals=tuple(series["arrivals"]),
        source=f"profile {path}",
        completions=tuple(series["completions"]),
        running=tuple(series["running"]),
        waiting=tuple(series["waiting"]),
        replicas=(1.0,) * n,
        kv_usage=tuple(series["kv"]),
        ttft_mean=tuple(series["ttft"]),
        tpot_mean=tuple(series["tpot"]),
        prompt_tokens=(workload.prompt_tokens.mean,) * n,
        output_tokens=(workload.output_tokens.mean,) * n,
        notes=(
            f"one replica's profile ({profile.server.model}, vLLM "
            f"{profile.server.vllm_version}), steps in the order run",
        ),
    )
