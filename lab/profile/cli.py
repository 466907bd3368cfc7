"""Measure one vLLM replica's capacity curve and knee under a workload and SLO, and recommend targets.

`vllm-autoscale profile --url URL --model NAME` drives the server with streaming requests and reads
its `/metrics` while it does; the files land in `--out` (see `lab.profile.output.report`). Exit status: 0
with a complete profile, 1 when the run stopped early (the partial profile is still written, and
the reason is one line on stderr), 2 for invalid flags.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from lab.load.workload import fixed, read_pairs
from lab.profile.launch import max_num_seqs
from lab.profile.output.report import build, summary, write
from lab.profile.output.view import ProgressView
from lab.profile.profiler import Profiler
from lab.profile.schema import PercentileSlo
from lab.profile.settings import Settings
from lab.units import duration


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"percentile {text!r} must be between 0 and 1, e.g. 0.9")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `profile` sub-command's flags."""
    parser.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", required=True, help="the served model name (as /v1/models lists it)")
    shape = parser.add_argument_group("workload (fixed token counts, or a file of pairs)")
    shape.add_argument(
        "--prompt-tokens", type=int, default=512, help="prompt tokens per request (default 512)"
    )
    shape.add_argument(
        "--output-tokens", type=int, default=128, help="output tokens per request (default 128)"
    )
    shape.add_argument(
        "--workload",
        type=Path,
        metavar="FILE",
        help="lines of 'prompt_tokens,output_tokens', drawn at random (overrides the two above)",
    )
    slo = parser.add_argument_group("SLO")
    slo.add_argument(
        "--slo-ttft",
        type=duration,
        default=0.5,
        metavar="DURATION",
        help="time to first token (default 500ms)",
    )
    slo.add_argument(
        "--slo-tpot",
        type=duration,
        default=0.05,
        metavar="DURATION",
        help="time per output token (default 50ms)",
    )
    slo.add_argument(
        "--slo-percentile", type=_fraction, default=0.9, help="the percentile both must hold at (default 0.9)"
    )
    parser.add_argument(
        "--budget",
        type=duration,
        default=600.0,
        metavar="DURATION",
        help="wall-clock limit (default 10m: on a real engine ~1m "
        "of sweep, the scan and 4-6 deciding steps of 20-70s)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("profile-out"), help="directory for the files (default profile-out)"
    )
    parser.add_argument(
        "--launch",
        metavar="COMMAND",
        help='start the server with this command first (e.g. "vllm '
        'serve MODEL"), record its cold start, stop it after',
    )
    parser.add_argument(
        "--max-num-seqs",
        type=int,
        help="the server's --max-num-seqs, for the record (vLLM does not export it)",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="the server's seconds per real second: an emulator's --time-scale (default 1: a real server)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the arrivals and request lengths (prompt tokens are always new)",
    )
    parser.add_argument("--plain", action="store_true", help="print lines instead of redrawing a panel")
    pd = parser.add_argument_group("a prefill-decode pair (lab/profile/pd/cli.py)")
    pd.add_argument(
        "--pd",
        action="store_true",
        help="profile a P/D pair through --url: prefill throughput, decode knee, KV hand-over, P:D",
    )
    pd.add_argument("--prefill-url", metavar="URL", help="the prefill engine (its /metrics)")
    pd.add_argument("--decode-url", metavar="URL", help="the decode engine (its /metrics; default --url)")
    pd.add_argument(
        "--pd-window",
        type=duration,
        default=20.0,
        metavar="DURATION",
        help="each level's measured window, server seconds (default 20s)",
    )


def settings_from(args: argparse.Namespace) -> Settings:
    """`Settings` from parsed flags; `ValueError` naming a bad one."""
    workload = read_pairs(args.workload) if args.workload else fixed(args.prompt_tokens, args.output_tokens)
    if not args.time_scale > 0:
        raise ValueError(f"--time-scale {args.time_scale!r} must be > 0")
    if args.max_num_seqs is not None and args.max_num_seqs < 1:
        raise ValueError(f"--max-num-seqs {args.max_num_seqs!r} must be at least 1")
    launched_seqs = max_num_seqs(args.launch) if args.launch else None
    return Settings(
        url=args.url,
        model=args.model,
        workload=workload,
        slo=PercentileSlo(args.slo_ttft, args.slo_tpot, args.slo_percentile),
        budget=args.budget,
        time_scale=args.time_scale,
        seed=args.seed,
        max_num_seqs=args.max_num_seqs or launched_seqs,
        launch=args.launch,
        launch_log=args.out / "server.log",
    )


def run(args: argparse.Namespace) -> int:
    """Run the profile, write the files, print the summary; the exit status."""
    if args.pd:
        from lab.profile.pd import cli as pd_cli  # a pair's profile is its own measurement

        return pd_cli.run(args)
    try:
        settings = settings_from(args)
    except ValueError as error:
        print(f"vllm-autoscale profile: {error}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    title = f"vllm-autoscale profile: {settings.model} at {settings.url}"
    view = ProgressView(
        sys.stdout,
        title=title,
        budget=settings.budget,
        percentile=settings.slo.percentile,
        interactive=False if args.plain else None,
    )
    profiler = Profiler(settings, view)
    interrupted = False
    try:
        result = asyncio.run(profiler.run())
    except KeyboardInterrupt:
        interrupted, result = True, profiler.result
    profile = build(settings, result)
    written = write(args.out, profile, title=title)
    print(summary(profile))
    print("wrote " + ", ".join(str(path) for path in written))
    if interrupted:
        return 130
    if not profile.complete:
        print(f"vllm-autoscale profile: {profile.error}", file=sys.stderr)
        return 1
    return 0
