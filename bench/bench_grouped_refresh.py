"""Grouped refresh at fleet size: upstream queries per refresh, adapter CPU, RSS and p99 answer time.

A real Prometheus (remote-write receiver) holds one vLLM pod per key: `keys / 10` namespaces of 10
models each (`tests/integration/fleets.py`). For each key count the adapter runs as its own process,
served as `vllm-autoscale serve` serves (`adapter.server.serve`), on fleets of the same shape, in each
mode asked for: the per-key path (the source without `fetch_many`, the baseline: one query per key per
refresh) and the grouped refresh. Each run first asks every key once (its first fetch), then, from a
refresh tick on (5 s apart, the default), sends a fixed rate of GETs cycling over the keys for
`--seconds` and reads the adapter's upstream-query counter, its CPU time and RSS from /proc, and the
client-side latency of each answer.

A p99 is a tail statistic: over 3,000 answers it is their 30th slowest, and on a shared machine
another process taking a core for a few milliseconds moves it as much as the key count does. So the
sizes are measured in `--rounds` rounds, alternating their order from round to round (100, 1,000, then
1,000, 100, ...) so a drift of the machine's load falls on both alike, and the p99 is reported per
round and over every answer of a size in all rounds (pooled). The client's own garbage collector is
kept out of the measured window (it would add its pauses to whichever answer it was timing).

On a machine of two or more CPUs the adapter runs alone on CPU 0 and the client and Prometheus share
CPU 1, Prometheus under `SCHED_IDLE`: in a cluster Prometheus is another machine, and its work
evaluating a grouped query should delay neither the adapter nor the client's clock (a niced task
still holds the CPU for up to a scheduler slice when the client wakes; an idle-class one is
preempted at once). Ratios compare the grouped run with the per-key run of the same size, and with
the grouped run at 100 keys (the issue's "within 1.2x of 100 keys").

    .venv/bin/python bench/bench_grouped_refresh.py [--keys 10 100 1000 2000] [--seconds 30] [--rate 100]
        [--rounds 1] [--modes per-key grouped]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapter import server
from adapter.app import create_app, make_source
from adapter.config import load
from adapter.errors import AdapterError
from adapter.sources import Sample, Scope
from adapter.sources.prometheus import PrometheusSource
from adapter.telemetry import UPSTREAM_SECONDS, Telemetry
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.selectors import Selector
from tests.integration import procs
from tests.integration.fleets import Pod, series
from tests.integration.remote_write import push

METRIC = "vllm_requests_inflight"
MODELS = 10
#: the adapter's refresh interval: `prometheus.refresh_interval`'s default
REFRESH_SECONDS = 5.0
_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
# The time after a tick in which a refresh runs at these sizes (query, answer, settling): a slow
# answer sent then may have waited for it; by chance a fifth of them are.
_REFRESH_WINDOW = 1.0
PINNED = (os.cpu_count() or 1) >= 2


def _background(pid: int) -> None:
    """Move every thread of `pid` to CPU 1 in the idle scheduling class (new Go threads inherit both)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), {1})
        os.sched_setscheduler(int(task.name), os.SCHED_IDLE, os.sched_param(0))


class PerKey:
    """The source without `fetch_many`: the provider then refreshes key by key (the baseline)."""

    def __init__(self, inner: PrometheusSource) -> None:
        self.inner = inner
        self.name = inner.name

    async def start(self) -> None:
        await self.inner.start()

    async def fetch(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        # One key's own query, kept between refreshes as the source keeps a key refreshed on its own
        # (its `fetch` is a first fetch, which keeps nothing).
        (outcome,) = await self.inner.fetch_many(metric, [Scope(namespace, selector)])
        if isinstance(outcome, AdapterError):
            raise outcome
        return outcome

    async def ping(self) -> None:
        await self.inner.ping()

    def describe(self, metric: MetricDef, namespace: str | None, selector: Selector) -> str:
        return self.inner.describe(metric, namespace, selector)

    async def close(self) -> None:
        await self.inner.close()


def serve(prometheus_url: str, port: int, mode: str) -> None:
    """Run the adapter as `serve` runs it (`adapter.server.serve`) until SIGTERM (insecure loopback
    serving, `REFRESH_SECONDS` refresh)."""
    config = load(
        f"prometheus: {{url: '{prometheus_url}', refresh_interval: {REFRESH_SECONDS:g}s}}\n"
        f"server: {{address: 127.0.0.1, port: {port}, insecure_serving: true}}\n"
        "cache: {max_keys: 5000}\nlogging: {level: warning}\n"
    )
    telemetry = Telemetry()
    source = make_source(config, telemetry)
    assert isinstance(source, PrometheusSource)
    app = create_app(config, source=source if mode == "grouped" else PerKey(source), telemetry=telemetry)

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await server.serve(config, app, stop)

    asyncio.run(main())


class Run(NamedTuple):
    round: int
    keys: int
    mode: str
    queries_per_refresh: float
    cpu_percent: float
    rss_mib: float
    p50_ms: float
    p99_ms: float
    answers: list[float | None]
    latencies: list[float]
    """Each answer's latency (seconds), sorted."""
    after_tick: list[float]
    """Of the slowest 1 % of answers, how long after a refresh tick each was sent (seconds)."""


def _start(command: list[str]) -> subprocess.Popen[bytes]:
    """The adapter's process (started before the measured window, so its blocking start costs nothing)."""
    return subprocess.Popen(command)


def _proc(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) and RSS (MiB) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / _TICKS_PER_SECOND
    rss = next(
        line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS")
    )
    return cpu, int(rss.split()[1]) / 1024


async def _upstream_queries(session: aiohttp.ClientSession, url: str) -> float:
    async with session.get(url + "/metrics") as response:
        text = await response.text()
    return sum(
        float(line.split()[-1]) for line in text.splitlines() if line.startswith(f"{UPSTREAM_SECONDS}_count")
    )


def _paths(prefix: str, keys: int) -> list[str]:
    return [
        f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{prefix}ns{n}/{METRIC}?labelSelector=model_name%3Dm{m}"
        for n in range(keys // MODELS)
        for m in range(MODELS)
    ]


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[float, float | None, float]:
    """An answer's latency, its value (`None` for an error) and when it was sent (wall clock)."""
    sent, started = time.time(), time.perf_counter()
    async with session.get(url) as response:
        body: dict[str, Any] = await response.json()
    elapsed = time.perf_counter() - started
    value = float(body["items"][0]["value"]) if response.status == 200 else None
    return elapsed, value, sent


async def measure(prometheus_url: str, keys: int, mode: str, seconds: float, rate: float, round_: int) -> Run:
    """One adapter process over a fresh fleet of `keys` pods: warm every key, then measure."""
    prefix = f"{mode[0]}{keys}r{round_}-"
    now = time.time()
    push(
        prometheus_url,
        [
            s
            for n in range(keys // MODELS)
            for m in range(MODELS)
            for s in series(Pod(f"{prefix}ns{n}", f"pod-{m}", f"m{m}", running=float(m), traffic=None), now)
        ],
    )
    port = procs.free_port()
    command = [sys.executable, __file__, "serve", prometheus_url, str(port), mode]
    if PINNED:
        command = ["taskset", "-c", "0", *command]
    process = _start(command)
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as session:
            for _ in range(100):
                try:
                    async with session.get(url + "/readyz") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
            paths = [url + p for p in _paths(prefix, keys)]
            warm = asyncio.Semaphore(32)

            async def first(path: str) -> None:
                async with warm:
                    await _get(session, path)

            await asyncio.gather(*(first(p) for p in paths))
            await asyncio.sleep(REFRESH_SECONDS - time.time() % REFRESH_SECONDS + 0.5)  # just after a refresh
            queries0, (cpu0, _) = await _upstream_queries(session, url), _proc(process.pid)
            # The client's collector would add its pauses to the answer it is timing: off for the window.
            gc.collect()
            gc.disable()
            started = time.monotonic()
            timed: list[tuple[float, float]] = []
            tasks = []
            try:
                for i in range(
                    int(seconds * rate)
                ):  # open loop: one GET every 1/rate s, whatever the answers
                    await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
                    tasks.append(asyncio.create_task(_get(session, paths[i % len(paths)])))
                timed = [(elapsed, sent) for elapsed, _, sent in await asyncio.gather(*tasks)]
                elapsed = time.monotonic() - started
            finally:
                gc.enable()
            cpu1, rss = _proc(process.pid)
            queries1 = await _upstream_queries(session, url)
            answers = [value for _, value, _ in await asyncio.gather(*(_get(session, p) for p in paths))]
    finally:
        process.terminate()
        process.wait(10)
    timed.sort()
    latencies = [elapsed for elapsed, _ in timed]
    slowest = timed[len(timed) - len(timed) // 100 :]
    return Run(
        round_,
        keys,
        mode,
        (queries1 - queries0) / (elapsed / REFRESH_SECONDS),
        100 * (cpu1 - cpu0) / elapsed,
        rss,
        1000 * statistics.median(latencies),
        1000 * _p99(latencies),
        answers,
        latencies,
        [sent % REFRESH_SECONDS for _, sent in slowest],
    )


def _p99(ordered: list[float]) -> float:
    """The 99th percentile of sorted values (nearest rank)."""
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def report(runs: list[Run]) -> None:
    print(
        f"{'round':>5} {'keys':>5} {'mode':>8} {'answers':>7} "
        f"{'queries/refresh':>16} {'CPU %':>6} {'RSS MiB':>8}"
        f" {'p50 ms':>7} {'p99 ms':>7}"
    )
    for r in runs:
        print(
            f"{r.round:>5} {r.keys:>5} {r.mode:>8} {len(r.latencies):>7} {r.queries_per_refresh:>16.1f}"
            f" {r.cpu_percent:>6.1f} {r.rss_mib:>8.1f} {r.p50_ms:>7.2f} {r.p99_ms:>7.2f}"
        )
    for round_ in sorted({r.round for r in runs}):
        grouped = {r.keys: r for r in runs if r.mode == "grouped" and r.round == round_}
        per_key = {r.keys: r for r in runs if r.mode == "per-key" and r.round == round_}
        print(f"\nround {round_}: grouped / per-key at the same size, and grouped / grouped at 100 keys:")
        for keys, g in grouped.items():
            p = per_key.get(keys)
            line = f"{keys:>5} keys:"
            if p is not None:
                same = "identical" if g.answers == p.answers else "DIFFERENT"
                line += (
                    f" queries {g.queries_per_refresh / p.queries_per_refresh:.3f}x, CPU "
                    f"{g.cpu_percent / p.cpu_percent:.2f}x,"
                    f" RSS {g.rss_mib / p.rss_mib:.2f}x, p99 {g.p99_ms / p.p99_ms:.2f}x, answers {same};"
                )
            if 100 in grouped:
                base = grouped[100]
                line += (
                    f" vs 100 keys: RSS {g.rss_mib / base.rss_mib:.2f}x, p99 {g.p99_ms / base.p99_ms:.2f}x"
                )
            print(line)
    pooled = {
        keys: sorted(x for r in runs if r.mode == "grouped" and r.keys == keys for x in r.latencies)
        for keys in sorted({r.keys for r in runs if r.mode == "grouped"})
    }
    if 100 in pooled and len({r.round for r in runs}) > 1:
        pooled_base = _p99(pooled[100])
        print("\ngrouped, every round's answers together (pooled):")
        for keys, latencies in pooled.items():
            ratios = [
                g.p99_ms / b.p99_ms
                for g in runs
                for b in runs
                if g.mode == b.mode == "grouped" and g.keys == keys and b.keys == 100 and g.round == b.round
            ]
            after = [t for r in runs if r.mode == "grouped" and r.keys == keys for t in r.after_tick]
            early = sum(t < _REFRESH_WINDOW for t in after)
            print(
                f"{keys:>5} keys: {len(latencies)} answers, p50 {1000 * statistics.median(latencies):.2f} ms,"
                f" p99 {1000 * _p99(latencies):.2f} ms ({_p99(latencies) / pooled_base:.2f}x of 100 keys);"
                f" per round {min(ratios):.2f}x to {max(ratios):.2f}x; slowest 1 %: {early} of {len(after)}"
                f" sent within {_REFRESH_WINDOW:g} s after a tick"
            )


async def main(args: argparse.Namespace) -> None:
    with (
        tempfile.TemporaryDirectory() as workdir,
        procs.prometheus(Path(workdir), [], extra_args=("--web.enable-remote-write-receiver",)) as prometheus,
    ):
        if PINNED:
            _background(prometheus.popen.pid)
            os.sched_setaffinity(0, {1})
        runs = []
        for round_ in range(1, args.rounds + 1):
            # Every other round in the reverse order: a drift of the machine's load falls on every size alike.
            for keys in args.keys if round_ % 2 else args.keys[::-1]:
                for mode in args.modes:
                    runs.append(await measure(prometheus.url, keys, mode, args.seconds, args.rate, round_))
                    print(
                        f"done: round {round_}, {keys} keys, {mode}, load {os.getloadavg()[0]:.2f}",
                        file=sys.stderr,
                    )
    report(runs)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        parser.add_argument("--keys", type=int, nargs="+", default=[10, 100, 1000, 2000])
        parser.add_argument("--seconds", type=float, default=30.0, help="measured time per run (6 refreshes)")
        parser.add_argument(
            "--rate", type=float, default=100.0, help="GETs per second, cycling over the keys"
        )
        parser.add_argument(
            "--rounds", type=int, default=1, help="rounds over the sizes, alternating their order"
        )
        parser.add_argument(
            "--modes", nargs="+", choices=("per-key", "grouped"), default=["per-key", "grouped"]
        )
        asyncio.run(main(parser.parse_args()))
