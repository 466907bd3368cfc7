"""`vllm-autoscale profile --pd`: profile a prefill-decode pair and add its P/D section to `profile.json`.

Requests go to `--url` (the pair's entry point: a P/D proxy, or `emulate --pd`'s decode server); the
engines' pages are read at `--prefill-url` and `--decode-url` (default `--url`). The section
(`lab.profile.pd.schema`) goes into `--out/profile.json`, beside an aggregated profile already there.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import aiohttp

from lab.load.workload import fixed, read_pairs
from lab.profile.pd.measure import PairMeter, PdSettings
from lab.profile.pd.recommend import PdProfileError, profile, summary
from lab.profile.pd.schema import PdProfile, write
from lab.profile.schema import PercentileSlo, ProfileError


def settings_from(args: argparse.Namespace) -> PdSettings:
    """`PdSettings` from the profile's flags; `ValueError` naming a bad one."""
    if args.prefill_url is None:
        raise ValueError("--pd needs --prefill-url URL (the prefill engine, whose /metrics is read)")
    if not args.time_scale > 0:
        raise ValueError(f"--time-scale {args.time_scale!r} must be > 0")
    workload = read_pairs(args.workload) if args.workload else fixed(args.prompt_tokens, args.output_tokens)
    return PdSettings(
        url=args.url,
        prefill_url=args.prefill_url,
        decode_url=args.decode_url or args.url,
        model=args.model,
        workload=workload,
        slo=PercentileSlo(args.slo_ttft, args.slo_tpot, args.slo_percentile),
        window=args.pd_window,
        budget=args.budget,
        time_scale=args.time_scale,
        seed=args.seed,
    )


async def measure(settings: PdSettings) -> PdProfile:
    """Measure the pair on the running loop (the system's, or a virtual-time loop in tests)."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        measured = await PairMeter(settings, session).measure()
    return profile(settings, measured)


def run(args: argparse.Namespace) -> int:
    """Profile the pair, write the section, print the summary; the exit status."""
    try:
        settings = settings_from(args)
    except ValueError as error:
        print(f"vllm-autoscale profile: {error}", file=sys.stderr)
        return 2
    try:
        pd = asyncio.run(measure(settings))
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "profile.json"
        write(pd, path)
    except (PdProfileError, ProfileError, RuntimeError, aiohttp.ClientError) as error:
        print(f"vllm-autoscale profile: {error}", file=sys.stderr)
        return 1
    print(summary(pd))
    print(f"wrote the P/D section of {path}")
    return 0
