"""Replay recorded traffic through the HPA model for a set of scaling policies and write a decision record.

`vllm-autoscale backtest` reads traffic from a trace file (`--trace`) or from a Prometheus
(`--prometheus-url --start --end --selector`), takes one replica's capacity from a profile, a flag or
a fit of the same data, simulates each policy (built-in sweep or `--policies FILE`) and writes the
table, the Pareto plot, the decision record and the recommended manifests into `--out`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import sys
import time
from datetime import datetime
from pathlib import Path

from lab.backtest.band import DECISION_SEEDS
from lab.backtest.calibration import Calibration, fit, given
from lab.backtest.decision import Rules
from lab.backtest.fleet import ROUTERS
from lab.backtest.history import History, HistoryError
from lab.backtest.inputs.profile_calibration import from_profile
from lab.backtest.inputs.prometheus_history import RangeRequest, read_prometheus
from lab.backtest.inputs.trace_file import read_trace
from lab.backtest.output.manifests import ScaleTarget
from lab.backtest.output.record import table
from lab.backtest.policy import (
    PIPELINES,
    Policy,
    SweepSettings,
    baselines,
    builtin_sweep,
    default_max_replicas,
)
from lab.backtest.policy_file import PolicyFileError, load_policies
from lab.backtest.runner import CSV_NAME, JSON_NAME, MARKDOWN_NAME, PNG_NAME, Backtest, evaluate, write
from lab.flags import renamed, slo_flags
from lab.profile.schema import ProfileError, load
from lab.slo import Slo
from lab.units import duration, duration_or_zero, positive

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(text: str, now: float | None = None) -> float:
    """Unix seconds, an ISO 8601 time, `now`, or `now-2h` (units s, m, h, d)."""
    now = time.time() if now is None else now
    value = text.strip()
    relative = re.fullmatch(r"now(?:-(\d+(?:\.\d+)?)([smhd]))?", value)
    if relative:
        return now - (float(relative[1]) * _UNITS[relative[2]] if relative[1] else 0.0)
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"time {text!r} must be Unix seconds, ISO 8601, 'now' or 'now-2h'") from None
    if moment.tzinfo is None:
        raise ValueError(f"time {text!r} must carry a time zone (e.g. 2026-11-26T10:00:00Z)")
    return moment.timestamp()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `backtest` sub-command's flags."""
    traffic = parser.add_argument_group("traffic (one of --trace, --prometheus-url)")
    traffic.add_argument(
        "--trace",
        type=Path,
        metavar="FILE",
        help="CSV: time,arrivals[,prompt_tokens,output_tokens], a demo CSV, a stage table, or a profile.json",
    )
    traffic.add_argument("--prometheus-url", metavar="URL", help="read vLLM's series from this Prometheus")
    traffic.add_argument("--start", help="range start: Unix seconds, ISO 8601, or now-2h")
    traffic.add_argument("--end", default="now", help="range end (default: now)")
    traffic.add_argument(
        "--selector", default="", help="label selector of the model's series, e.g. model_name=llama"
    )
    traffic.add_argument(
        "--query-step",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="Prometheus query step (>= 2 scrape intervals; default 30s)",
    )
    renamed(traffic, "--step", "--query-step", "query_step", duration)
    capacity = parser.add_argument_group("capacity (default: fitted from the recorded data)")
    capacity.add_argument(
        "--profile",
        "--engine-profile",
        dest="profile",
        type=Path,
        metavar="FILE",
        help="a `vllm-autoscale profile` file: the replica's capacity, knee and service model",
    )
    capacity.add_argument(
        "--capacity", type=positive, metavar="RPS", help="requests/s one replica completes when saturated"
    )
    capacity.add_argument(
        "--disaggregated",
        type=Path,
        metavar="FILE",
        help="a P/D profile (`profile --pd`): compare per-role and "
        "joint scaling of its two pools (lab/backtest/pools/cli.py)",
    )
    policies = parser.add_argument_group("policies (default: the built-in sweep and baselines)")
    policies.add_argument(
        "--policies", type=Path, metavar="FILE", help="YAML policy file (lab/backtest/policy_file.py)"
    )
    policies.add_argument("--min-replicas", type=int, default=1)
    policies.add_argument("--max-replicas", type=int, help="default: room for twice the peak")
    policies.add_argument(
        "--cold-start",
        type=duration_or_zero,
        metavar="DURATION",
        help="from a new replica to Ready (default: the profile's, else 60s)",
    )
    policies.add_argument(
        "--pipeline", choices=sorted(PIPELINES), default="scrape", help="how fresh the HPA's metric is"
    )
    policies.add_argument(
        "--sync-period", type=duration, default=15.0, metavar="DURATION", help="HPA sync period (default 15s)"
    )
    judge = parser.add_argument_group("decision")
    slo_flags(judge)
    judge.add_argument(
        "--slo-attainment",
        type=positive,
        default=Rules.slo_attainment,
        help="share of requests that must meet both",
    )
    judge.add_argument(
        "--min-requests", type=int, default=Rules.min_requests, help="fewer requests decide nothing"
    )
    judge.add_argument(
        "--max-cost-ratio", type=positive, default=Rules.max_cost_ratio, help="x the cheapest supported"
    )
    judge.add_argument(
        "--seeds",
        type=int,
        default=DECISION_SEEDS,
        help="seeded replays per policy (arrival instants and scrape phase): the band's range; "
        "supported needs every seed to meet the SLO (0: one fluid replay, no band)",
    )
    judge.add_argument(
        "--router",
        choices=ROUTERS,
        default="service",
        help="how requests reach replicas: a Service's random "
        "spread, or least requests in flight (a gateway)",
    )
    out = parser.add_argument_group("output")
    out.add_argument(
        "--out", type=Path, default=Path("backtest-out"), help="directory for the table, plot and record"
    )
    out.add_argument("--namespace", default="default", help="namespace of the manifests")
    out.add_argument("--deployment", default="vllm", help="the Deployment the manifests scale")
    out.add_argument(
        "--resolution", type=duration, default=1.0, metavar="DURATION", help="simulation tick (default 1s)"
    )
    out.add_argument("--gpus-per-replica", type=positive, default=1.0)
    out.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="processes the replays run in (default: one per CPU)",
    )


def traffic(args: argparse.Namespace) -> History:
    """The history the flags name; `HistoryError` or `ValueError` in one line."""
    if (args.trace is None) == (args.prometheus_url is None):
        raise ValueError("give exactly one of --trace FILE and --prometheus-url URL")
    if args.trace is not None:
        if args.start is not None:
            raise ValueError("--start/--end select a Prometheus range; a --trace is replayed whole")
        return read_trace(args.trace)
    if args.start is None:
        raise ValueError("--prometheus-url needs --start (and --end, default now)")
    request = RangeRequest(
        args.prometheus_url, parse_time(args.start), parse_time(args.end), args.query_step, args.selector
    )
    return asyncio.run(read_prometheus(request))


def calibration(args: argparse.Namespace, history: History) -> Calibration:
    """Capacity from --capacity, --profile, or a fit of `history`."""
    if args.capacity is not None and args.profile is not None:
        raise ValueError("give at most one of --capacity and --profile")
    if args.capacity is not None:
        return given(args.capacity)
    if args.profile is not None:
        return from_profile(load(args.profile), str(args.profile))
    return fit(history)


def policies(args: argparse.Namespace, history: History, cal: Calibration, cold_start: float) -> list[Policy]:
    """The built-in sweep, or the policy file's policies (plus the baselines unless it says not)."""
    peak = history.peak_rate()
    knee, _ = cal.knee_rate(args.slo_tpot)
    settings = SweepSettings(
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas
        or max(args.min_replicas, default_max_replicas(peak, cal.model.capacity)),
        cold_start=cold_start,
        pipeline=PIPELINES[args.pipeline],
        sync_period=args.sync_period,
        knee_rate=knee,
    )
    if args.policies is None:
        return builtin_sweep(cal.model, settings, peak, cal.saturation)
    base = Policy(
        "base",
        min_replicas=settings.min_replicas,
        max_replicas=settings.max_replicas,
        cold_start=cold_start,
        pipeline=settings.pipeline,
        sync_period=settings.sync_period,
        knee_rate=knee,
    )
    chosen, with_baselines = load_policies(args.policies, base)
    return chosen + (baselines(base, cal.model, peak) if with_baselines else [])


def run(args: argparse.Namespace) -> int:
    """Run the backtest; print the calibration, the table, the verdicts and where the files are."""
    try:
        if args.seeds < 0:
            raise ValueError(f"--seeds {args.seeds} must be 0 (one fluid replay) or more")
        history = traffic(args)
        if args.disaggregated is not None:
            from lab.backtest.pools import (
                cli as pool_cli,  # the two-pool backtest has its own policies and table
            )

            return pool_cli.run(args, history)
        cal = calibration(args, history)
        profile_cold = load(args.profile).cold_start_seconds if args.profile else None
        cold_start = args.cold_start if args.cold_start is not None else (profile_cold or 60.0)
        chosen = policies(args, history, cal, cold_start)
        backtest = Backtest(
            history=history,
            calibration=cal,
            policies=chosen,
            out=args.out,
            slo=Slo(args.slo_ttft, args.slo_tpot),
            rules=Rules(args.slo_attainment, args.min_requests, max_cost_ratio=args.max_cost_ratio),
            target=ScaleTarget(args.namespace, args.deployment, args.selector),
            resolution=args.resolution,
            gpus_per_replica=args.gpus_per_replica,
            seeds=args.seeds,
            router=args.router,
            jobs=max(1, args.jobs),
            command=shlex.join(["vllm-autoscale", "backtest", *sys.argv[2:]])
            if sys.argv[1:2] == ["backtest"]
            else "vllm-autoscale backtest",
        )
        print(
            f"traffic: {history.source}: {history.requests:.0f} requests over {history.duration / 60:.1f} min"
        )
        for gap in history.gaps():
            print(f"  gap: {gap.start:g}-{gap.end:g} s without data ({gap.seconds:g} s), not replayed")
        for line in cal.lines():
            print(line)
        decision = evaluate(backtest)
        write(backtest, decision)
    except (HistoryError, PolicyFileError, ProfileError, ValueError) as error:
        print(f"vllm-autoscale backtest: {error}", file=sys.stderr)
        return 2
    print(table(decision))
    for judged in decision.judged:
        print(f"{judged.policy.name}: {judged.verdict}: {judged.reason}")
    best = decision.recommended
    print(
        f"recommended: {best.policy.name} ({best.policy.describe()})"
        if best
        else "recommended: none (no candidate is supported)"
    )
    out = args.out
    print(f"wrote {out / CSV_NAME}, {out / PNG_NAME}, {out / MARKDOWN_NAME}, {out / JSON_NAME}")
    return 0
