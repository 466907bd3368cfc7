"""Compare engine configurations side by side on the host's GPUs, repeated, with evidence gates.

`vllm-autoscale experiment CATALOG` starts one engine per GPU (`--gpus`, else `CUDA_VISIBLE_DEVICES`;
with neither, `--slots` GPU-less engines: emulators), queues the catalog's variants onto them and
writes the record into `--out` (`lab.experiments.record`). The record is written however the run
ends: at its end, on Ctrl-C or SIGTERM, or on an error of the harness itself (it says which). Exit
status: 0 when every variant ran, 1 when one was blocked or failed (or the harness failed), 2 for an
invalid catalog or flags, 130 when stopped (the partial record is still written).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

from lab import virtual_time
from lab.emulate.in_process import InProcessEmulator, emulator_arguments
from lab.engine.placement import PlacementPool, gpu_flag, host_gpus, placements
from lab.engine.process import EngineFailure, EngineProcess, Placement, render
from lab.experiments.catalog import Catalog, CatalogError, load
from lab.experiments.gates import judge
from lab.experiments.record import Record, write
from lab.experiments.runner import EngineFactory, Runner, where
from lab.units import duration


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `experiment` sub-command's flags."""
    parser.add_argument(
        "catalog", type=Path, help="the catalog (YAML): engine, variants, workload, SLO, seeds, questions"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("experiment-out"),
        help="directory for the record (default experiment-out)",
    )
    parser.add_argument(
        "--gpus", help="GPUs to use, e.g. 0,1 (default: CUDA_VISIBLE_DEVICES); one engine each"
    )
    parser.add_argument(
        "--slots",
        type=int,
        default=2,
        help="engines side by side when there are no GPUs (emulators; default 2)",
    )
    parser.add_argument(
        "--base-port",
        type=int,
        metavar="PORT",
        help="engines listen from this port on, one a placement (default: free ports); a port "
        "found taken is retried on a free one",
    )
    parser.add_argument(
        "--measure-step",
        type=duration,
        metavar="DURATION",
        help="override the catalog's measure.step: each step's measured window, real time",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the engines (emulator commands: `vllm-autoscale emulate ...`) in this process on "
        "virtual time: repeatable, whatever the machine's load",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="validate the catalog, print the plan and its time, run nothing",
    )


def plan(catalog: Catalog, engines: int) -> list[str]:
    """What the run will do and how long its measuring takes (engine starts come on top)."""
    m = catalog.measure
    per_seed = (1 + m.knee_steps if catalog.capacity else 0) + (1 if catalog.cost_rate is not None else 0)
    boundary = 0
    if catalog.boundary is not None:
        boundary += catalog.boundary.prompt.steps if catalog.boundary.prompt else 0
        boundary += 1 + catalog.boundary.rate.steps if catalog.boundary.rate else 0
    step = m.settle + m.step + 1.0  # the idle wait before each step: about a second once load stops
    seconds = {
        v.name: len(catalog.seeds) * step * (per_seed + (boundary if _bounded(catalog, v.name) else 0))
        for v in catalog.variants
    }
    lines = [
        f"{v.name}: {catalog.command(v)}  (~{seconds[v.name] / 60:.1f} min of steps)"
        for v in catalog.variants
    ]
    total = sum(seconds.values())
    lines.append(
        f"{len(catalog.variants)} variants x {len(catalog.seeds)} seeds on {engines} engines side by side: "
        f"~{total / engines / 60:.1f} min of steps a placement (at least {max(seconds.values()) / 60:.1f}), "
        "plus each engine's start"
    )
    return lines


def _bounded(catalog: Catalog, name: str) -> bool:
    return catalog.boundary is not None and name in catalog.boundary.variants


def run(args: argparse.Namespace) -> int:
    try:
        catalog = load(args.catalog)
        if args.measure_step is not None:
            catalog = replace(catalog, measure=replace(catalog.measure, step=args.measure_step))
        gpus = host_gpus(gpu_flag(args.gpus))
        available = placements(gpus, args.slots, args.base_port)
        pool = PlacementPool(available)
        engines: EngineFactory = EngineProcess.from_template
        if args.in_process:
            emulator_arguments(render(catalog.engine.command, available[0]))
            engines = InProcessEmulator.from_template
    except (CatalogError, EngineFailure, ValueError) as error:
        print(f"vllm-autoscale experiment: {error}", file=sys.stderr)
        return 2
    for line in plan(catalog, pool.size):
        print(line)
    if args.dry_run:
        return 0
    say = lambda text: print(text, flush=True)  # noqa: E731
    runner = Runner(catalog, pool, args.out, say, fixed_ports=args.base_port is not None, engines=engines)
    began = time.monotonic()
    stopped = None
    # SIGTERM before the event loop takes it over, or after: a stop, as Ctrl-C is (the loop's own
    # handler cancels the run while it runs).
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        virtual_time.run(_until_stopped(runner), virtual=args.in_process)
    except (KeyboardInterrupt, asyncio.CancelledError):
        stopped = "the run was stopped before every variant was measured"
    except Exception as error:  # the harness's own error: the record of what was measured still stands
        stopped = f"the run failed: {type(error).__name__}: {error}"
    finally:
        # The record is written whatever comes now: a second Ctrl-C or SIGTERM would lose it.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    runner.finish()
    record = _record(args, catalog, runner, available, time.monotonic() - began, stopped)
    written = write(args.out, record)
    for row in record.rows:
        print(f"{row.question:16} {row.variant:20} {row.verdict:10} {row.why.splitlines()[0]}")
    print("wrote " + ", ".join(str(path) for path in written))
    if stopped and stopped.startswith("the run was stopped"):
        return 130
    failed = stopped or any(o.state in ("blocked", "failed") for o in runner.outcomes.values())
    return 1 if failed else 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _record(
    args: argparse.Namespace,
    catalog: Catalog,
    runner: Runner,
    available: list[Placement],
    seconds: float,
    stopped: str | None,
) -> Record:
    """The record of what the runner did; the variants a stop left undone judged **stopped**."""
    outcomes = runner.outcomes
    undone = {
        n: _undone(o.state, stopped) for n, o in outcomes.items() if o.state in ("stopped", "never run")
    }
    rows = judge(
        catalog,
        {n: o.repeats for n, o in outcomes.items()},
        {n: o.blocked for n, o in outcomes.items() if o.blocked},
        undone,
    )
    command = shlex.join(["vllm-autoscale", "experiment", *sys.argv[2:]])
    return Record(catalog, outcomes, rows, command, tuple(where(p) for p in available), seconds, stopped)


def _undone(state: str, stopped: str | None) -> str:
    why = stopped or "the run ended"
    if state == "never run":
        return f"never run: {why} while it waited for a GPU"
    return f"stopped while measuring: {why} (its finished seeds are in the per-seed table, not judged)"


async def _until_stopped(runner: Runner) -> None:
    """The run, cancelled on SIGTERM as on Ctrl-C: every engine is stopped on the way out."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    await runner.run()
