"""Check a twin against the server it was profiled from: one open-loop sweep of each, side by side.

`vllm-autoscale fidelity --url URL --profile profile.json` starts the twin (`vllm-autoscale emulate
--profile profile.json`, on a free local port) unless `--twin-url` names one already running, sweeps
open-loop steps at `--fractions` of the profile's knee against the server and then against the twin
(one after the other, so that neither shares the machine with the other's load), and prints, per
rate, both sides' running requests, TTFT p50 and percentile, mean TPOT and the waiting queue with
its trend, with the fidelity criteria (`lab.profile.twin.fidelity`). `--out` writes both sweeps and the
comparison as JSON. Exit status: 0 when every criterion holds, 1 when one does not or the run
failed, 2 for invalid flags.

The two sweeps need not run together: `--server-only` records one sweep (of the server, or of a
twin started with `emulate --profile`, each with its own `--out`), and `--server-record FILE` and
`--twin-record FILE` compare recorded sweeps instead of sweeping again (a server record without
`--fractions` is compared at its own rates, so a twin of a later profile of the same server needs no
new sweep of it); `--twin-time-scale` runs a
twin in slow motion (0.5: one emulated second in two real ones) on a machine too busy to stream at
the server's rate in real time.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import aiohttp

from lab import json_out
from lab.engine.placement import free_port
from lab.flags import renamed
from lab.load.server import ProfileFailure
from lab.profile.launch import Launched
from lab.profile.schema import Profile, ProfileError, Step, load, step_from
from lab.profile.twin.fidelity import DEFAULT_FRACTIONS, SweepSettings, compare, render, sweep
from lab.units import duration


def _fractions(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--fractions {text!r} must be numbers separated by commas"
        ) from None
    if not values or any(not 0 < v <= 5 for v in values):
        raise argparse.ArgumentTypeError(
            f"--fractions {text!r}: each must be in (0, 5], e.g. 0.3,0.6,0.9,1.2"
        )
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `fidelity` sub-command's flags."""
    parser.add_argument("--url", help="the profiled server's base URL (needed unless --server-record)")
    parser.add_argument(
        "--profile",
        required=True,
        type=Path,
        metavar="FILE",
        help="the server's `vllm-autoscale profile` file: the twin, the workload, the SLO and the knee",
    )
    parser.add_argument("--model", help="served model name (default: the profile's)")
    parser.add_argument("--twin-url", help="a twin already running (default: start one on a free local port)")
    parser.add_argument(
        "--fractions",
        type=_fractions,
        help="rates as fractions of the profile's knee (default 0.3,0.45,0.6,0.75,0.9,1,1.1,1.2; "
        "with --server-record, the record's own rates)",
    )
    parser.add_argument(
        "--window",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="measured window of each step, in the server's seconds (default 30s)",
    )
    renamed(parser, "--step", "--window", "window", duration)
    parser.add_argument(
        "--settle",
        type=duration,
        default=5.0,
        metavar="DURATION",
        help="unmeasured lead-in of each step (default 5s)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the arrivals and request lengths")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="both servers' seconds per real second (emulators' --time-scale; default 1)",
    )
    parser.add_argument(
        "--twin-time-scale",
        type=float,
        help="the twin's seconds per real second, when it differs from --time-scale",
    )
    parser.add_argument(
        "--server-only",
        action="store_true",
        help="sweep the server only and write its record to --out (compare later)",
    )
    parser.add_argument(
        "--server-record",
        type=Path,
        metavar="FILE",
        help="the server's sweep from an earlier --out, instead of sweeping --url again",
    )
    parser.add_argument(
        "--twin-record",
        type=Path,
        metavar="FILE",
        help="the twin's sweep from an earlier --server-only run against it, instead of sweeping a twin",
    )
    parser.add_argument("--out", type=Path, help="write both sweeps and the comparison here (JSON)")


def _twin_scale(args: argparse.Namespace) -> float:
    return float(args.twin_time_scale or args.time_scale)


def _twin_command(args: argparse.Namespace, model: str, port: int) -> str:
    return shlex.join(
        [
            sys.executable,
            "-m",
            "adapter",
            "emulate",
            "--profile",
            str(args.profile),
            "--model",
            model,
            "--base-port",
            str(port),
            "--time-scale",
            f"{_twin_scale(args):g}",
            "--seed",
            str(args.seed),
        ]
    )


def _recorded(path: Path, rates: list[float] | None) -> list[Step]:
    """The steps of an earlier `--out` (its `server` sweep); `ProfileFailure` unless it swept `rates`
    (any rates when `None`)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        steps = [step_from(s, f"{path}: server[{i}]") for i, s in enumerate(record["server"])]
    except (OSError, ValueError, KeyError, TypeError, ProfileError) as error:
        raise ProfileFailure(f"unable to read the server's sweep from {path}: {error}") from error
    if rates is not None and [s.offered_rate for s in steps] != rates:
        raise ProfileFailure(
            f"{path} swept {[s.offered_rate for s in steps]} req/s, "
            f"not {rates}: give the same --fractions and profile"
        )
    return steps


async def _run(args: argparse.Namespace, profile: Profile, model: str) -> tuple[list[Step], list[Step]]:
    assert profile.knee is not None
    fractions = args.fractions
    if fractions is None and not args.server_record:
        fractions = DEFAULT_FRACTIONS
    # A server record without --fractions keeps its own rates: a twin built from another profile of the
    # same server (a later probe, another seed) is compared at the arrivals the server was measured on.
    rates = None if fractions is None else [round(f * profile.knee.rate, 3) for f in fractions]

    def settings(url: str, time_scale: float) -> SweepSettings:
        return SweepSettings(
            url=url,
            model=model,
            workload=profile.workload,
            slo=profile.slo,
            step_seconds=args.window,
            settle_seconds=args.settle,
            seed=args.seed,
            time_scale=time_scale,
        )

    if args.server_record:
        server = _recorded(args.server_record, rates)
        rates = [s.offered_rate for s in server]
        print(f"server: {len(server)} steps from {args.server_record}")
    else:
        assert rates is not None
        print(f"server {args.url}: {len(rates)} steps of {args.window:g}s")
        server = await sweep(settings(args.url, args.time_scale), rates)
    if args.server_only:
        return server, []
    if args.twin_record:
        print(f"twin: {len(rates)} steps from {args.twin_record}")
        return server, _recorded(args.twin_record, rates)
    if args.twin_url:
        print(f"twin {args.twin_url}")
        return server, await sweep(settings(args.twin_url, _twin_scale(args)), rates)
    port = free_port()
    twin_url = f"http://127.0.0.1:{port}"
    log = (args.out.parent if args.out else Path(".")) / "twin.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    launched = Launched(_twin_command(args, model, port), log)
    async with aiohttp.ClientSession() as session:
        try:
            await launched.start(session, twin_url, ready_within=60.0)
            print(f"twin {twin_url} (log {log})")
            return server, await sweep(settings(twin_url, _twin_scale(args)), rates)
        finally:
            await launched.stop()


def run(args: argparse.Namespace) -> int:
    """Sweep both, print the comparison; the exit status."""
    try:
        profile = load(args.profile)
    except ProfileError as error:
        print(f"vllm-autoscale fidelity: {error}", file=sys.stderr)
        return 2
    if profile.knee is None:
        print(f"vllm-autoscale fidelity: profile {args.profile} has no knee to sweep around", file=sys.stderr)
        return 2
    for flag, scale in (("--time-scale", args.time_scale), ("--twin-time-scale", _twin_scale(args))):
        if not scale > 0:
            print(f"vllm-autoscale fidelity: {flag} {scale!r} must be > 0", file=sys.stderr)
            return 2
    if not args.url and not args.server_record:
        print("vllm-autoscale fidelity: give --url (the server to sweep) or --server-record", file=sys.stderr)
        return 2
    if args.server_only and (args.server_record or not args.out):
        print("vllm-autoscale fidelity: --server-only needs --out and no --server-record", file=sys.stderr)
        return 2
    model = args.model or profile.server.model
    try:
        server, twin = asyncio.run(_run(args, profile, model))
    except ProfileFailure as error:
        print(f"vllm-autoscale fidelity: {error}", file=sys.stderr)
        return 1
    if args.server_only:
        _write(args.out, _record(args, server))
        return 0
    comparison = compare(server, twin, profile.slo)
    for line in render(comparison, profile.slo):
        print(line)
    if args.out:
        _write(
            args.out,
            _record(args, server)
            | {
                "twin": [dataclasses.asdict(t) for t in twin],
                "server_knee": comparison.server_knee,
                "twin_knee": comparison.twin_knee,
                "ok": comparison.ok,
            },
        )
    return 0 if comparison.ok else 1


def _record(args: argparse.Namespace, server: list[Step]) -> dict[str, Any]:
    """A record's header (what was swept, how) and the server's sweep: `--server-only` writes this
    much, a comparison adds the twin's sweep and the verdicts."""
    return {
        "profile": str(args.profile),
        "server_url": args.url,
        "step_seconds": args.window,
        "settle_seconds": args.settle,
        "seed": args.seed,
        "server": [dataclasses.asdict(s) for s in server],
    }


def _write(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json_out.text(record), encoding="utf-8")
    print(f"wrote {path}")
