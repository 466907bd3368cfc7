"""Where a grouped refresh holds the event loop: each step of one refresh of N keys, timed.

The real provider and value cache refresh N keys of `vllm_requests_inflight` (N / 10 namespaces of 10 models,
as bench/bench_grouped_refresh.py), but Prometheus is answered from memory: a grouped answer of three rows per
key (value, target count, sample time), parsed from its JSON each time. So the refresh's own work is measured
alone, without the network, a Prometheus or a client. An answer waits for the step of the loop that is running
when it arrives, and for the steps queued before its own: the longest step and the number of steps are what a
request arriving during a refresh pays. Each refresh's CPU time, number of steps and longest step are reported
as medians over `--refreshes`, with the longest step's maximum (a garbage collection of the whole heap falls
in some refresh at any size), and the garbage collections of each generation per refresh (what a refresh keeps
alive for a while reaches the older, slower ones). A second pass, traced by tracemalloc (which slows every
allocation, so it times nothing), reports the memory Python holds after two refreshes.

    .venv/bin/python bench/bench_refresh_blocks.py [--keys 100 1000 2000] [--refreshes 20]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapter.app import make_provider
from adapter.clock import Clock
from adapter.config import load
from adapter.server import freeze_start_up_heap
from adapter.sources.prometheus import PrometheusSource
from adapter.sources.prometheus_api import _stepwise
from adapter.sources.prometheus_body import ResultReader, body_steps
from adapter.telemetry import Telemetry
from adapter.vocabulary import selectors
from adapter.vocabulary.promql.combined import PART_LABEL
from tests.fakes import Ticker

METRIC = "vllm_requests_inflight"
MODELS = 10
EVALUATED = 1_800_000_000.0

_steps: list[float] = []
_run_step = asyncio.events.Handle._run
_collections = [0, 0, 0]


def _counted_collection(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _collections[info["generation"]] += 1


def _timed_step(self: asyncio.Handle) -> None:
    # The event loop runs every callback and task step through `Handle._run`; timing it here sees
    # each stretch the loop cannot answer anything else, whichever coroutine it belongs to.
    started = time.perf_counter()
    _run_step(self)
    _steps.append(time.perf_counter() - started)


def _body(groups: list[dict[str, str]]) -> bytes:
    rows: list[dict[str, Any]] = [
        {"metric": {PART_LABEL: part, **labels}, "value": [EVALUATED, value]}
        for part, value in (("value", "3"), ("count", "1"), ("timestamp", str(EVALUATED - 2)))
        for labels in groups
    ]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": rows}}).encode()


async def measure(keys: int, refreshes: int, prefix: str) -> str:
    """One provider over `keys` keys, each fetched once, then `refreshes` refreshes, step by step.
    Namespaces are named after `prefix`, so no pass finds the queries an earlier pass kept."""
    groups = [
        {"namespace": f"{prefix}ns{n}", "model_name": f"m{m}"}
        for n in range(keys // MODELS)
        for m in range(MODELS)
    ]
    grouped, alone = _body(groups), _body([{}])

    async def query(
        promql: str, at: float | None = None, reader: ResultReader | None = None
    ) -> tuple[str, Any]:
        await asyncio.sleep(0)  # the round trip
        # read as `PrometheusSource.query` reads a body
        body = grouped if "by (namespace, model_name)" in promql else alone
        return await _stepwise(body_steps(200, body, reader))

    config = load("prometheus: {url: 'http://127.0.0.1:9', refresh_interval: 5s}\ncache: {max_keys: 5000}\n")
    source = PrometheusSource(config.prometheus)
    source.query = query  # type: ignore[method-assign]
    ticker = Ticker(wall=EVALUATED)
    provider = make_provider(config, source, Telemetry(), clock=Clock(wall=ticker, monotonic=time.monotonic))
    provider.cache._sleep = ticker.sleep  # the refresh runs when this bench ticks, not on the wall clock
    freeze_start_up_heap()  # as the server does once it listens
    for labels in groups:
        await provider.get(METRIC, labels["namespace"], selectors.parse(f"model_name={labels['model_name']}"))
    await ticker.sleeping()
    runs = []
    _collections[:] = [0, 0, 0]
    gc.callbacks.append(_counted_collection)
    for _ in range(refreshes):
        _steps.clear()
        cpu = time.process_time()
        await ticker.tick()
        runs.append((time.process_time() - cpu, len(_steps), max(_steps)))
    gc.callbacks.remove(_counted_collection)
    await provider.cache.close()
    if tracemalloc.is_tracing():
        gc.collect()
        return f"{tracemalloc.get_traced_memory()[0] / 2**20:>10.1f}"
    cpu_times, counts, longest = zip(*runs, strict=True)
    return (
        f"{keys:>5} {len(grouped) // 1024:>8} {1000 * statistics.median(cpu_times):>8.1f} "
        f"{statistics.median(counts):>6.0f}"
        f" {1000 * statistics.median(longest):>13.2f} {1000 * max(longest):>10.2f}"
        f" {'/'.join(f'{n / refreshes:.1f}' for n in _collections):>14}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[100, 1000, 2000])
    parser.add_argument("--refreshes", type=int, default=20)
    args = parser.parse_args()
    asyncio.events.Handle._run = _timed_step  # type: ignore[method-assign]
    print(
        f"{'keys':>5} {'body KiB':>8} {'CPU ms':>8} {'steps':>6} {'longest ms p50':>13} {'max ms':>10}"
        f" {'GCs gen 0/1/2':>14} {'held MiB':>10}"
    )
    for keys in args.keys:
        timed = asyncio.run(measure(keys, args.refreshes, f"timed{keys}-"))
        tracemalloc.start()
        print(timed, asyncio.run(measure(keys, 2, f"traced{keys}-")))
        tracemalloc.stop()


if __name__ == "__main__":
    main()
