"""Run emulated vLLM servers on local ports (`vllm-autoscale emulate`).

With `--profile FILE` (written by `vllm-autoscale profile`) the engine is the profiled server's twin
(`lab.profile.twin.params`): its batch slots, KV cache, step costs and front-end time come from the profile,
and any engine flag given beside it still wins. With `--pd` and a profile file that also holds the pair's
`pd` section, the pair's twin: its decode line and hand-over as the pair measured them (`pair_from`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
import typing
from collections.abc import Callable
from dataclasses import MISSING, fields, replace
from pathlib import Path
from typing import Any

from adapter.config.reference import field_docs
from lab.emulator.fleet import EmulatedFleet
from lab.emulator.metrics_page import VERSIONS
from lab.emulator.params import EngineParams
from lab.emulator.pd import fleet as disaggregated
from lab.emulator.pd.fleet import DEFAULT_TRANSFER_SECONDS
from lab.emulator.replica import EmulatedReplica
from lab.profile.pd import schema as pd_schema
from lab.profile.schema import load
from lab.profile.twin.params import twin_params

_DEFAULT_MODEL = "emulated-model"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `emulate` flags: the fleet's, then one per `EngineParams` field."""
    parser.add_argument("--replicas", type=int, default=1, help="number of emulated servers (default 1)")
    parser.add_argument(
        "--base-port",
        type=int,
        default=8000,
        help="port of the first server; the others follow (default 8000)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    parser.add_argument(
        "--model",
        help=f"served model name: the model_name label (default: the profile's, else {_DEFAULT_MODEL})",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="FILE",
        help="a profile from `vllm-autoscale profile`: emulate the profiled server (engine flags still win)",
    )
    parser.add_argument(
        "--vllm-version",
        choices=VERSIONS,
        default=VERSIONS[0],
        help="metric naming to emit (default %(default)s)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the emulation; equal seeds replay equally"
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="emulated seconds per real second (default 1: real time)",
    )
    parser.add_argument(
        "--load-delay", type=float, default=0.0, help="emulated seconds before a server listens (cold start)"
    )
    parser.add_argument(
        "--pd",
        metavar="P:D",
        help="a disaggregated pair: P prefill-role then D decode-role servers; a request sent to a decode "
        "server prefills on a prefill server first (lab.emulator.pd.fleet)",
    )
    parser.add_argument(
        "--kv-transfer-seconds",
        type=float,
        help="with --pd: emulated seconds a request's KV takes from prefill to decode (default: the "
        f"profile's measured hand-over, else {DEFAULT_TRANSFER_SECONDS})",
    )
    engine = parser.add_argument_group(
        "engine", "the emulated engine (defaults calibrated on a real vLLM 0.26)"
    )
    docs = field_docs(EngineParams)
    hints = typing.get_type_hints(EngineParams)
    for field in fields(EngineParams):
        flag = "--" + field.name.replace("_", "-")
        default = field.default if field.default is not MISSING else None
        help_text = f"{docs.get(field.name, field.name)} (default {default})"
        kind = hints[field.name]
        if kind is bool:
            engine.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        else:
            base = next((t for t in typing.get_args(kind) if t is not type(None)), kind)
            engine.add_argument(flag, type=base, default=None, metavar=base.__name__.upper(), help=help_text)


def params_from(args: argparse.Namespace) -> EngineParams:
    """`EngineParams` with the flags given on the command line, over the profile's twin when one is
    given; `ValueError` if they are invalid or the profile cannot make a twin."""
    given = {f.name: getattr(args, f.name) for f in fields(EngineParams) if getattr(args, f.name) is not None}
    base = twin_params(load(args.profile)) if args.profile is not None else EngineParams()
    return replace(base, **given)


def pair_from(args: argparse.Namespace) -> tuple[EngineParams, float]:
    """The engine and hand-over seconds of a `--pd` pair: with a profile whose file also holds the
    pair's `pd` section (`profile --pd` into the same `--out`), the twin of the pair: the decode line
    the pair measured (TPOT base and per running request, the step costs of an engine that computes no
    prompt) and its hand-over, where the aggregated profile's twin would guess them (on the H200 pair its
    per-request cost was half the pair's, docs/benchmarks/pd-pair.md). Flags still win."""
    params = params_from(args)
    transfer = args.kv_transfer_seconds
    if args.profile is not None and pd_schema.SECTION in _sections(args.profile):
        pair = pd_schema.load(args.profile)
        base, per_seq = args.step_base_seconds, args.step_per_seq_seconds
        params = replace(
            params,
            step_base_seconds=pair.decode.tpot_base_seconds if base is None else base,
            step_per_seq_seconds=pair.decode.tpot_per_request_seconds if per_seq is None else per_seq,
        )
        transfer = pair.handover_seconds if transfer is None else transfer
    return params, DEFAULT_TRANSFER_SECONDS if transfer is None else transfer


def _sections(path: Path) -> set[str]:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()  # `load` has already said what is wrong with it
    return set(found) if isinstance(found, dict) else set()


def model_from(args: argparse.Namespace) -> str:
    """The served model name: `--model`, else the profiled server's, else the default."""
    if args.model:
        return str(args.model)
    return load(args.profile).server.model if args.profile is not None else _DEFAULT_MODEL


def fleet_from(
    args: argparse.Namespace,
    params: EngineParams,
    *,
    host: str,
    base_port: int,
    monotonic: Callable[[], float] = time.monotonic,
) -> EmulatedFleet:
    """The aggregated fleet the flags describe (a process's, or one inside a command on its loop's
    clock: `monotonic`)."""
    return EmulatedFleet(
        model=model_from(args),
        params=params,
        host=host,
        base_port=base_port,
        vllm_version=args.vllm_version,
        load_delay=args.load_delay,
        time_scale=args.time_scale,
        seed=args.seed,
        monotonic=monotonic,
    )


def _say(line: str) -> None:
    print(line, flush=True)


async def serve_fleet(
    args: argparse.Namespace, stop: asyncio.Event, say: Callable[[str], None] = _say
) -> None:
    """Run the fleet the arguments describe until `stop` is set."""
    model = model_from(args)
    if args.pd:
        params, transfer = pair_from(args)
        pd = disaggregated.DisaggregatedFleet(
            model=model,
            params=params,
            host=args.host,
            base_port=args.base_port,
            time_scale=args.time_scale,
            transfer_seconds=transfer,
            seed=args.seed,
        )
        await disaggregated.serve(pd, *disaggregated.parse_pd(args.pd), stop, say)
        return
    fleet = fleet_from(args, params_from(args), host=args.host, base_port=args.base_port)
    async with fleet:
        await fleet.start(args.replicas)
        say(f"emulating vLLM {args.vllm_version} serving {model!r} on {len(fleet.replicas)} server(s)")
        waiting: dict[asyncio.Future[Any], EmulatedReplica] = {
            asyncio.ensure_future(r.wait_ready()): r for r in fleet.replicas
        }
        stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        while waiting and not stop.is_set():
            done, _ = await asyncio.wait([*waiting, stopped], return_when=asyncio.FIRST_COMPLETED)
            for future in done - {stopped}:
                say(f"ready: {waiting.pop(future).url}  (/metrics /health /v1/models /v1/completions)")
        for future in waiting:
            future.cancel()
        await stopped


def run(args: argparse.Namespace) -> int:
    """Entry point of `vllm-autoscale emulate`: serve until SIGINT or SIGTERM."""
    try:
        params_from(args)
    except ValueError as error:
        print(f"vllm-autoscale emulate: {error}", file=sys.stderr)
        return 2
    if args.pd:
        try:
            disaggregated.parse_pd(args.pd)
        except ValueError as error:
            print(f"vllm-autoscale emulate: {error}", file=sys.stderr)
            return 2
        if args.kv_transfer_seconds is not None and not args.kv_transfer_seconds >= 0:
            print(
                f"vllm-autoscale emulate: --kv-transfer-seconds {args.kv_transfer_seconds!r} must be >= 0",
                file=sys.stderr,
            )
            return 2
    if args.replicas < 1:
        print(f"vllm-autoscale emulate: --replicas {args.replicas!r} must be >= 1", file=sys.stderr)
        return 2

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve_fleet(args, stop)

    try:
        asyncio.run(main())
    except OSError as error:
        print(f"vllm-autoscale emulate: {error}", file=sys.stderr)
        return 1
    return 0
