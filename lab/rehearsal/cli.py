"""Rehearse a scaling policy on real engine processes, beside the backtest's prediction of the same run.

`vllm-autoscale rehearse` is the demo's loop where each replica is an engine process started from a
command template on its own GPU and port (`vllm serve ... --port {port}` on a GPU host, `vllm-autoscale
emulate --base-port {port} ...` anywhere), the load comes from recorded traffic, and the outcome is
printed beside the backtest of the same trace and policy on the engine's profile (docs/rehearsal.md).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from lab.backtest.history import HistoryError
from lab.backtest.inputs.profile_calibration import from_profile
from lab.backtest.inputs.trace_file import read_trace
from lab.backtest.policy import Policy
from lab.demo.loadgen import SCENARIOS
from lab.demo.report import CSV_NAME, PNG_NAME
from lab.demo.summary import summarize
from lab.engine.placement import gpu_flag, host_gpus
from lab.engine.process import EngineFailure
from lab.flags import renamed, slo_flags
from lab.profile.schema import Profile, ProfileError, load
from lab.rehearsal import prediction, report
from lab.rehearsal.load import Load, day_history
from lab.rehearsal.runner import ENGINE_FAILURE, Played, Rehearsal
from lab.rehearsal.settings import RehearsalError, RehearsalSettings
from lab.slo import Slo
from lab.units import duration, duration_or_zero, positive

#: Metrics both the adapter's scrape source serves with its default configuration and the backtest's
#: fleet model computes.
METRICS = ("vllm_requests_inflight", "vllm_requests_waiting", "vllm_requests_running", "vllm_kv_cache_usage")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `rehearse` sub-command's flags."""
    parser.add_argument(
        "--engine",
        required=True,
        metavar="TEMPLATE",
        help='the engine\'s command with {port} (and {gpu}), e.g. "vllm serve MODEL --port {port}"',
    )
    parser.add_argument(
        "--profile",
        required=True,
        type=Path,
        metavar="FILE",
        help="the engine's profile (`vllm-autoscale profile`): the prediction's replica, the "
        "request sizes, the default target and SLO",
    )
    parser.add_argument("--model", help="served model name (default: the profile's)")
    parser.add_argument(
        "--gpus", help="GPUs to use, one engine each, e.g. 0,1 (default: CUDA_VISIBLE_DEVICES)"
    )
    traffic = parser.add_argument_group("load (one of --trace, --day, --prometheus-url)")
    traffic.add_argument(
        "--trace", type=Path, metavar="FILE", help="a trace file, as `backtest --trace` reads"
    )
    traffic.add_argument("--day", choices=sorted(SCENARIOS), help="the demo's day, at the profile's capacity")
    traffic.add_argument("--prometheus-url", metavar="URL", help="a recorded range of vLLM's series")
    traffic.add_argument("--start", help="range start: Unix seconds, ISO 8601, or now-2h")
    traffic.add_argument("--end", default="now", help="range end (default: now)")
    traffic.add_argument("--selector", default="", help="label selector of the model's series")
    traffic.add_argument(
        "--query-step",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="Prometheus query step (default 30s)",
    )
    renamed(traffic, "--step", "--query-step", "query_step", duration)
    traffic.add_argument(
        "--compress",
        type=positive,
        default=1.0,
        help="trace seconds per second of the run; rates stay (default 1)",
    )
    traffic.add_argument(
        "--duration",
        type=duration,
        metavar="DURATION",
        help="play the whole trace in this long (sets --compress)",
    )
    traffic.add_argument("--rate-scale", type=positive, default=1.0, help="factor on every rate (default 1)")
    hpa = parser.add_argument_group("the HPA under test")
    hpa.add_argument(
        "--metric", choices=METRICS, default=METRICS[0], help="external metric (default %(default)s)"
    )
    hpa.add_argument("--target", type=positive, help="target value (default: the profile's recommendation)")
    hpa.add_argument("--target-type", choices=["AverageValue", "Value"], help="default: the profile's")
    hpa.add_argument("--min-replicas", type=int, default=1)
    hpa.add_argument(
        "--max-replicas",
        type=int,
        help="default: one per GPU given or visible (CUDA_VISIBLE_DEVICES), else 4 emulators",
    )
    hpa.add_argument(
        "--start-replicas", type=int, help="replicas Ready before the load (default: --min-replicas)"
    )
    hpa.add_argument(
        "--sync-period", type=duration, default=15.0, metavar="DURATION", help="(Kubernetes: 15s)"
    )
    hpa.add_argument("--tolerance", type=float, default=0.1, help="(Kubernetes: 0.1)")
    hpa.add_argument(
        "--downscale-stabilization",
        type=duration_or_zero,
        default=300.0,
        metavar="DURATION",
        help="(Kubernetes: 5m)",
    )
    run = parser.add_argument_group("the run")
    run.add_argument(
        "--time-scale",
        type=positive,
        default=1.0,
        help="emulated seconds per wall second: an emulator's --time-scale (default 1: real engines)",
    )
    run.add_argument(
        "--scrape-interval", type=duration, default=5.0, metavar="DURATION", help="the adapter's (default 5s)"
    )
    run.add_argument(
        "--grace",
        type=duration_or_zero,
        default=30.0,
        metavar="DURATION",
        help="a draining replica's time (default 30s)",
    )
    run.add_argument(
        "--ready-within",
        type=duration,
        default=1800.0,
        metavar="DURATION",
        help="wall-clock time an engine may take to become healthy (default 30m)",
    )
    run.add_argument(
        "--unresponsive-after",
        type=duration,
        default=20.0,
        metavar="DURATION",
        help="wall-clock time a Ready engine's /health may stay silent before its replica has "
        "failed (default 20s)",
    )
    slo_flags(run, from_profile=True)
    run.add_argument("--seed", type=int, default=0, help="seed of the arrivals and request sizes")
    run.add_argument(
        "--band-seeds",
        type=int,
        default=prediction.BAND_SEEDS,
        help="seeded backtests of the traffic whose range is the prediction's band "
        "(default 119: one more day falls outside it with probability 2/120)",
    )
    run.add_argument("--out", type=Path, default=Path("rehearsal-out"), help="directory for the files")
    run.add_argument("--plain", action="store_true", help="print lines instead of redrawing a panel")


def target_of(args: argparse.Namespace, profile: Profile) -> tuple[float, str]:
    """The target and its type: as given, else the profile's recommendation for the metric."""
    recommended = profile.targets.get(args.metric)
    if args.target is not None:
        return args.target, args.target_type or (recommended.type if recommended else "AverageValue")
    if recommended is None:
        raise RehearsalError(f"profile has no recommended target for {args.metric!r}: give --target")
    return recommended.value, args.target_type or recommended.type


def settings_from(args: argparse.Namespace, profile: Profile, gpus: tuple[str, ...]) -> RehearsalSettings:
    """`RehearsalSettings` from parsed flags; `ValueError` naming a bad one."""
    target, target_type = target_of(args, profile)
    # The GPUs given, else those this process can see: one engine each (no GPU at all: emulators).
    visible = gpus or tuple(host_gpus())
    maximum = args.max_replicas or (len(visible) if visible else 4)
    policy = Policy(
        f"{args.metric}-{target:g}",
        metric=args.metric,
        target_type="Value" if target_type == "Value" else "AverageValue",
        target=target,
        min_replicas=args.min_replicas,
        max_replicas=maximum,
        sync_period=args.sync_period,
        tolerance=args.tolerance,
        downscale_stabilization=args.downscale_stabilization,
    )
    slo = profile.slo
    return RehearsalSettings(
        engine=args.engine,
        model=args.model or profile.server.model,
        policy=policy,
        out=args.out,
        gpus=gpus,
        time_scale=args.time_scale,
        slo=Slo(args.slo_ttft or slo.ttft_seconds, args.slo_tpot or slo.tpot_seconds),
        start_replicas=args.start_replicas or max(1, args.min_replicas),
        scrape_interval=args.scrape_interval,
        grace=args.grace,
        ready_within=args.ready_within,
        unresponsive_after=args.unresponsive_after,
        seed=args.seed,
        live=False if args.plain else None,
    )


async def load_from(args: argparse.Namespace, capacity: float) -> Load:
    """The traffic the flags name, compressed and rescaled."""
    given = [name for name in ("trace", "day", "prometheus_url") if getattr(args, name) is not None]
    if len(given) != 1:
        raise RehearsalError("give exactly one of --trace FILE, --day NAME and --prometheus-url URL")
    day = SCENARIOS[args.day] if args.day else None
    if args.trace is not None:
        history = read_trace(args.trace)
    elif day is not None:
        history = day_history(day, capacity)
    else:
        if args.start is None:
            raise RehearsalError("--prometheus-url needs --start (and --end, default now)")
        # Only here: prometheus-api-client (the lab's extra) is needed for recorded ranges alone, and
        # a GPU host rehearsing a trace file need not have it.
        from lab.backtest.cli import parse_time
        from lab.backtest.inputs.prometheus_history import RangeRequest, read_prometheus

        request = RangeRequest(
            args.prometheus_url, parse_time(args.start), parse_time(args.end), args.query_step, args.selector
        )
        history = await read_prometheus(request)
    compress = history.duration / args.duration if args.duration else args.compress
    return Load(history, compress=compress, rate_scale=args.rate_scale, day=day)


async def rehearse(args: argparse.Namespace, stopped_by: Callable[[], str] = lambda: "cancelled") -> Played:
    """Run the rehearsal and its prediction, and write the record; what was played (its `stopped` set
    when a signal or an engine that would not start ended it early). `stopped_by` names the signal."""
    profile = load(args.profile)
    calibration = from_profile(profile, str(args.profile))
    settings = settings_from(args, profile, tuple(gpu_flag(args.gpus) or ()))
    traffic = await load_from(args, calibration.capacity.value)
    rehearsal = Rehearsal(settings, traffic, profile.workload, sys.stdout, stopped_by=stopped_by)
    played = await rehearsal.play()
    cold_start = prediction.measured_cold_start(played.cold_starts)
    predicted = gap = band = None
    # A run stopped early gets no prediction: a supervisor's SIGTERM grants seconds, not the band's
    # backtests, and the requests cut at the stop would bias a comparison (docs/rehearsal.md).
    if cold_start is not None and played.stopped is None:
        until = played.ticks[-1].t
        history = prediction.sent_history(
            played.sent, until, settings.start_replicas, f"rehearsal of {traffic.source}"
        )
        predicted = prediction.predict(settings.policy, calibration, history, settings.slo, cold_start)
        gap = prediction.gap(summarize(played.ticks, played.requests, settings.slo), predicted)
        planned = prediction.planned_history(traffic, until, settings.start_replicas)
        band = prediction.predict_band(
            settings.policy, calibration, planned, settings.slo, cold_start, seeds=args.band_seeds
        )
    _, text = report.write(
        settings, played, predicted, gap, title=f"rehearsal: {settings.policy.describe()}", band=band
    )
    print(text)
    print(
        f"wrote {args.out / PNG_NAME}, {args.out / CSV_NAME}, {args.out / report.TEXT_NAME} and more in "
        f"{args.out}"
    )
    return played


def run(args: argparse.Namespace) -> int:
    """Entry point of `vllm-autoscale rehearse`: Ctrl-C or SIGTERM stop it cleanly (every engine ends,
    the record of what was played is written) with status 130."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("adapter.api.routes").setLevel(logging.ERROR)
    signalled: list[str] = []

    async def main() -> Played:
        task = asyncio.current_task()
        assert task is not None

        def stop(sig: signal.Signals) -> None:
            # The first signal cancels the run, which stops its engines and writes its record; a
            # second must not cut that short (the engines' own grace bounds how long it takes).
            if not signalled:
                task.cancel()
            signalled.append(sig.name)

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop, sig)
        return await rehearse(args, lambda: signalled[0] if signalled else "cancelled")

    try:
        played = asyncio.run(main())
    except (RehearsalError, ProfileError, HistoryError, ValueError) as error:
        print(f"vllm-autoscale rehearse: {error}", file=sys.stderr)
        return 2
    except EngineFailure as failure:
        print(f"vllm-autoscale rehearse: {failure}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, asyncio.CancelledError):
        # Stopped outside the rehearsal's play (reading the profile or the traffic): nothing was played.
        print("vllm-autoscale rehearse: stopped; every engine it started has ended", file=sys.stderr)
        return 130
    stop = played.stopped
    if stop is None:
        return 0
    if stop.by == ENGINE_FAILURE:
        print(f"vllm-autoscale rehearse: {stop.reason}", file=sys.stderr)
        return 1
    print(
        f"vllm-autoscale rehearse: stopped by {stop.by}; every engine it started has ended", file=sys.stderr
    )
    return 130
