"""Run the whole autoscaling loop locally: emulated vLLM, the adapter, load and a model of the HPA.

`vllm-autoscale demo` needs nothing but this package. Durations are emulated seconds; `--time-scale`
says how many pass per real second, so Kubernetes' real constants (15 s sync, 300 s scale-down
window) stay the defaults and the run still fits in minutes.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from lab.demo.capacity import ENGINES
from lab.demo.loadgen import SCENARIOS
from lab.demo.report import CSV_NAME, PNG_NAME, SUMMARY_NAME
from lab.demo.runner import play_demo
from lab.demo.settings import DemoSettings
from lab.flags import slo_flags
from lab.hpa import DEFAULT_VERSION
from lab.profile.schema import load
from lab.profile.twin.params import twin_params
from lab.slo import Slo
from lab.units import duration, duration_or_zero, positive


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `demo` sub-command's flags."""
    parser.add_argument(
        "--metric",
        help="external metric the HPA scales on (default: queue_depth through a queue, else "
        "vllm_request_rate_forecast guarded by vllm_requests_inflight; inflight_within_demand caps "
        "in-flight at what the arrival rate needs)",
    )
    parser.add_argument(
        "--target",
        type=positive,
        help="target value of --metric (default: for the forecast the knee's rate per replica / 1.1, "
        "0.75 x max_num_seqs for an in-flight AverageValue, 0.5 x for inflight_within_demand, 1 for "
        "Value, for queue_depth the messages one replica drains in one cold start)",
    )
    parser.add_argument(
        "--target-type", choices=["AverageValue", "Value"], default="AverageValue", help="HPA target type"
    )
    parser.add_argument("--profile", choices=sorted(SCENARIOS), default="default", help="traffic profile")
    parser.add_argument(
        "--out", type=Path, default=Path("demo-out"), help="directory for PNG, CSV and summary"
    )
    parser.add_argument(
        "--time-scale", type=positive, help="emulated seconds per real second (default: the profile's)"
    )
    parser.add_argument(
        "--sync-period",
        type=duration,
        default=15.0,
        metavar="DURATION",
        help="HPA sync period, emulated (Kubernetes: 15s)",
    )
    parser.add_argument(
        "--downscale-stabilization",
        type=duration,
        metavar="DURATION",
        help="HPA scale-down stabilization window, emulated (Kubernetes: 5m; smoke profile: 60s; "
        "the forecast: at most 2m, the history it reads)",
    )
    parser.add_argument("--tolerance", type=float, default=0.1, help="HPA tolerance (Kubernetes: 0.1)")
    parser.add_argument(
        "--cold-start", type=duration_or_zero, metavar="DURATION", help="a new replica's load delay, emulated"
    )
    parser.add_argument(
        "--min-replicas", type=int, help="HPA minReplicas (default: the profile's, 0 for zero-idle)"
    )
    parser.add_argument("--max-replicas", type=int, default=8)
    parser.add_argument(
        "--kubernetes-version",
        default=DEFAULT_VERSION,
        help="the cluster the HPA model plays (feature gates; minReplicas 0 from 1.37) (default: "
        "%(default)s)",
    )
    parser.add_argument(
        "--no-baseline",
        dest="baseline",
        action="store_false",
        help="skip the minReplicas 1 run a scale-to-zero run is compared with",
    )
    parser.add_argument(
        "--engine",
        choices=sorted(ENGINES),
        default="demo",
        help="emulated engine preset (see lab.demo.capacity)",
    )
    parser.add_argument("--capacity", type=positive, help="requests/s one replica serves (default: measured)")
    parser.add_argument(
        "--engine-profile",
        type=Path,
        metavar="FILE",
        help="a profile from `vllm-autoscale profile`: the replicas are the profiled server's twin "
        "(lab.profile.twin.params) instead of an --engine preset (--profile names the traffic shape)",
    )
    slo_flags(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of the load and the engines")
    parser.add_argument("--plain", action="store_true", help="print lines instead of redrawing a panel")
    parser.add_argument(
        "--real-time",
        action="store_true",
        help="pace the run on the wall clock at --time-scale, to watch it or query its adapter while it "
        "runs (default: virtual time, the same summary for a seed on any machine, as fast as the CPU allows)",
    )


def settings_from(args: argparse.Namespace) -> DemoSettings:
    """`DemoSettings` from parsed flags; `ValueError` for a profile that cannot make a twin."""
    engine_params = None
    engine = args.engine
    if args.engine_profile is not None:
        # ProfileError and TwinError are ValueErrors: `run` prints them in one line.
        engine_params = twin_params(load(args.engine_profile))
        engine = f"twin of {args.engine_profile}"
    return DemoSettings(
        engine_params=engine_params,
        profile=SCENARIOS[args.profile],
        out=args.out,
        metric=args.metric,
        target_type=args.target_type,
        target=args.target,
        engine=engine,
        time_scale=args.time_scale,
        sync_period=args.sync_period,
        tolerance=args.tolerance,
        downscale_stabilization=args.downscale_stabilization,
        cold_start=args.cold_start,
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas,
        capacity=args.capacity,
        seed=args.seed,
        slo=Slo(ttft=args.slo_ttft, tpot=args.slo_tpot),
        live=False if args.plain else None,
        kubernetes_version=args.kubernetes_version,
        baseline=args.baseline,
        real_time=args.real_time,
    )


def run(args: argparse.Namespace) -> int:
    """Run the demo; print the summary and where the files are."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The adapter warns on every 503 it serves; in the demo those show in the HPA's decisions, and
    # log lines would tear the live panel.
    logging.getLogger("adapter.api.routes").setLevel(logging.ERROR)
    try:
        settings = settings_from(args)
        summary = play_demo(settings, sys.stdout)
    except ValueError as error:
        print(f"vllm-autoscale demo: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    print(summary.text())
    out = settings.out
    print(f"wrote {out / PNG_NAME}, {out / CSV_NAME}, {out / SUMMARY_NAME}")
    return 0
