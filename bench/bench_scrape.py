"""The scrape source's costs: parsing a page, fanning out over a fleet, and the freshness it serves.

1. Parse: one real vLLM 0.26.0 page (tests/data/, 60 KB, 679 lines) read for the catalogue's
   families by `page_parser.Parser` (warm: label blocks already seen, the steady state; cold: a new
   parser each time) versus a full `prometheus_client` parse, as a ratio in one run.
2. Fan-out: 200 fake pods, each its own aiohttp server on a loopback port serving the real
   overloaded page (with its own `num_requests_waiting`), one of them dead (refused port) and one
   slow (answers after 5 s, beyond the 0.8 s timeout), scraped at the default 1 s interval with
   `on_partial: ignore-failed`. The pods run in one child process, so the CPU measured is the
   scrape source's. Reports the round time, healthy pods' scrape latency, the failures, the CPU
   per round, and the fetched sum.
3. Freshness: the real application (value cache, provider) on the scrape source at a 1 s
   interval over 20 pods, asked for a metric at random instants by five keys created at random
   phases; the served sample's age (request time minus sample time), with the fetch alignment on,
   off (for comparison), and on with one pod timing out every round (`ignore-failed`).
4. Memory: the history a 200-pod fleet holds for a full 120 s window at 1 s.

`--pods 200 1000 2000 --parts fanout memory` repeats the fan-out and memory parts per fleet size
(where Prometheus should take over: docs/operations.md "At fleet size"); the fan-out then also
reports the process's RSS after its rounds.

    .venv/bin/python bench/bench_scrape.py [--seconds 60] [--pods 200] [--parts parse fanout freshness memory]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapter.api import routes as api
from adapter.app import create_app
from adapter.config import ScrapeSettings, load
from adapter.sources import scrape
from adapter.sources.discovery import StaticDiscovery
from adapter.sources.page_parser import Parser, histogram_samples
from adapter.sources.scrape import ScrapeSource
from adapter.sources.snapshots import History
from adapter.vocabulary import catalogue, selectors
from adapter.vocabulary.catalogue import GaugeSpec, HistogramSpec

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
WAITING = re.compile(r"^(vllm:num_requests_waiting\{[^}]*\}) \S+$", re.MULTILINE)


def wanted_names() -> list[str]:
    names = []
    for metric in catalogue.BUILTIN:
        spec = metric.spec
        if isinstance(spec, GaugeSpec):
            names += [name for family in spec.families for name in family]
        elif isinstance(spec, HistogramSpec):
            names += [sample for name in spec.family for sample in histogram_samples(name)]
    return names


def per_page(fn: Any, repeat: int) -> float:
    """Best-of-5 mean seconds per call (the minimum filters this shared machine's noise)."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - started) / repeat)
    return best


def bench_parse() -> None:
    print("## parse cost per page (real vLLM 0.26.0 captures)")
    names = wanted_names()
    for capture in ("metrics-idle.prom", "metrics-overloaded.prom"):
        text = (DATA / capture).read_text()
        warm = Parser(names)
        warm.parse(text)
        lines = sum(len(series) for series in warm.parse(text).values())
        full = per_page(lambda text=text: [list(f.samples) for f in text_string_to_metric_families(text)], 20)
        fast = per_page(lambda text=text, warm=warm: warm.parse(text), 500)
        cold = per_page(lambda text=text: Parser(names).parse(text), 200)
        print(
            f"{capture}: {len(text)} bytes, {text.count(chr(10))} lines, {lines} wanted series | "
            f"full prometheus_client {full * 1e3:.2f} ms | needed families warm {fast * 1e6:.0f} us "
            f"({full / fast:.0f}x), cold {cold * 1e6:.0f} us ({full / cold:.0f}x)"
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pod_pages(count: int) -> list[str]:
    """The real overloaded page, with `num_requests_waiting` = the pod's index."""
    template = (DATA / "metrics-overloaded.prom").read_text()
    return [WAITING.sub(rf"\g<1> {float(i)}", template) for i in range(count)]


async def serve_pods(count: int, slow: set[int]) -> None:
    """Run `count` pods on their own loopback ports; print the ports as one JSON line; serve until killed."""
    ports = []
    for i, body in enumerate(pod_pages(count)):

        async def handle(
            request: web.Request, body: str = body, delay: float = 5.0 if i in slow else 0.0
        ) -> web.Response:
            if delay:
                await asyncio.sleep(delay)
            return web.Response(text=body, content_type="text/plain")

        app = web.Application()
        app.router.add_get("/metrics", handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ports.append(runner.addresses[0][1])
    print(json.dumps(ports), flush=True)
    await asyncio.Event().wait()


class Pods:
    """Pods served by a child process, so the bench process's CPU is the scrape source's alone."""

    def __init__(self, count: int, slow: set[int]) -> None:
        args = [sys.executable, __file__, "--serve-pods", str(count), "--slow", ",".join(map(str, slow))]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        ports = json.loads(self.process.stdout.readline())
        self.urls = [f"http://127.0.0.1:{port}/metrics" for port in ports]
        self.expected = float(sum(i for i in range(count) if i not in slow))

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def _rss_mib() -> float:
    """This process's resident memory."""
    line = next(
        line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmRSS")
    )
    return int(line.split()[1]) / 1024


async def until_round(source: ScrapeSource, count: int) -> None:
    while source.rounds < count:  # noqa: ASYNC110 -- a bench polls; the source exposes no event
        await asyncio.sleep(0.01)


async def bench_fanout(pods: int, rounds: int) -> None:
    print(f"\n## fan-out: {pods} pods (1 dead, 1 slow) at a 1 s interval, timeout 0.8 s, ignore-failed")
    fleet = Pods(pods - 1, slow={0})
    urls, expected = [*fleet.urls, f"http://127.0.0.1:{free_port()}/metrics"], fleet.expected  # last: dead
    latencies: dict[str, list[float]] = {"success": [], "timeout": [], "error": []}

    def observe(outcome: str, seconds: float) -> None:
        latencies[outcome].append(seconds)

    settings = ScrapeSettings(targets=tuple(urls), interval=1.0, timeout=0.8, on_partial="ignore-failed")
    source = ScrapeSource(
        settings, catalogue.BUILTIN, discovery=StaticDiscovery(urls, "default"), observe=observe
    )
    waiting = catalogue.builtin("vllm_requests_waiting")
    try:
        await source.start()
        await source.fetch(waiting, "default", selectors.parse(""))  # first round: connections opened
        await until_round(source, source.rounds + 1)  # measure whole rounds only
        for values in latencies.values():
            values.clear()
        cpu0, wall0, done0 = time.process_time(), time.monotonic(), source.rounds
        await until_round(source, done0 + rounds)
        cpu = (time.process_time() - cpu0) / rounds
        wall = (time.monotonic() - wall0) / rounds
        observed = {outcome: list(values) for outcome, values in latencies.items()}
        sample = await source.fetch(waiting, "default", selectors.parse(""))
        ok = sorted(observed["success"])
        print(
            f"rounds measured: {rounds}; wall per round {wall:.3f} "
            f"s; scrape source CPU per round {cpu * 1e3:.0f} ms"
        )
        print(
            f"healthy scrapes: {len(ok)} ({len(ok) / rounds:.0f}/round), latency p50 "
            f"{statistics.median(ok) * 1e3:.1f} ms, "
            f"p99 {ok[int(len(ok) * 0.99)] * 1e3:.1f} ms, max {ok[-1] * 1e3:.1f} ms"
        )
        print(
            f"failed scrapes: {len(observed['timeout'])} timeouts "
            f"(median {statistics.median(observed['timeout'] or [0]):.2f} s), "
            f"{len(observed['error'])} refused (median "
            f"{statistics.median(observed['error'] or [0]) * 1e3:.1f} ms)"
        )
        print(
            f"fetched vllm_requests_waiting = {sample.value:g} over {sample.targets} pods "
            f"(expected {expected:g} over {pods - 2}); sample age {time.time() - sample.timestamp:.2f} s"
        )
        print(
            f"bench process RSS after {source.rounds} rounds: {_rss_mib():.0f} MiB; "
            f"CPU cores on this machine: {os.cpu_count()}"
        )
    finally:
        await source.close()
        fleet.close()


async def bench_freshness(seconds: float, pods: int, align: bool, slow: bool = False) -> None:
    fleet = Pods(pods, slow={0} if slow else set())
    config = load(
        f"source: scrape\nscrape: {{targets: {fleet.urls!r}, "
        f"interval: 1s, timeout: 0.8s, on_partial: ignore-failed}}\n"
        "logging: {level: warning}"
    )
    saved = scrape._ALIGN_FRACTION
    if not align:
        scrape._ALIGN_FRACTION = float("inf")  # type: ignore[misc]
    app = create_app(config)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    provider = app[api.PROVIDER]
    ages: list[float] = []
    rng = random.Random(1)
    # Each key is first asked for at a random phase of the scrape rounds, as HPA requests arrive;
    # several keys sample several phases. Every series has engine="0", so all keys are equal.
    keys = [selectors.parse(f"engine in (0,{n})") for n in range(1, 6)]
    try:
        for selector in keys:
            await asyncio.sleep(rng.uniform(0.0, 1.0))
            await provider.get("vllm_requests_inflight", "default", selector)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await asyncio.sleep(rng.uniform(0.0, 0.1))
            value = await provider.get("vllm_requests_inflight", "default", rng.choice(keys))
            ages.append(value.age)
    finally:
        scrape._ALIGN_FRACTION = saved  # type: ignore[misc]
        await runner.cleanup()
        fleet.close()
    ages.sort()
    print(
        f"alignment {'on ' if align else 'off'}{', 1 pod timing out' if slow else ''}: {len(ages)} requests, "
        f"served age p50 {statistics.median(ages):.3f} s, "
        f"p99 {ages[int(len(ages) * 0.99)]:.3f} s, max {ages[-1]:.3f} s"
    )


def bench_memory(pods: int) -> None:
    print(f"\n## history memory: {pods} pods x 121 scrapes (120 s window at 1 s)")
    names = wanted_names()
    parser = Parser(names)
    cumulative = sorted(s for s in names if s.endswith(("_bucket", "_sum", "_count")))
    texts = [(DATA / f).read_text() for f in ("metrics-idle.prom", "metrics-overloaded.prom")]
    gc.collect()
    tracemalloc.start()
    histories = [History(retention=120.0) for _ in range(pods)]
    for t in range(121):
        for history in histories:
            history.add(float(t), parser.parse(texts[t % 2]), cumulative)
    current, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    entries = sum(len(h.entries) for h in histories)
    print(f"{entries} snapshots held: {current / 2**20:.1f} MiB ({current / entries:.0f} bytes each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve-pods", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--slow", default="", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=60.0, help="freshness run length, per mode")
    parser.add_argument(
        "--pods", type=int, nargs="+", default=[200], help="fleet sizes of fan-out and memory"
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--parts",
        nargs="+",
        default=["parse", "fanout", "freshness", "memory"],
        choices=["parse", "fanout", "freshness", "memory"],
    )
    args = parser.parse_args()
    logging.getLogger("adapter").setLevel(logging.ERROR)  # the dead and slow pods are on purpose
    if args.serve_pods:
        asyncio.run(serve_pods(args.serve_pods, {int(i) for i in args.slow.split(",") if i}))
        return
    if "parse" in args.parts:
        bench_parse()
    if "fanout" in args.parts:
        for pods in args.pods:
            asyncio.run(bench_fanout(pods, args.rounds))
    if "freshness" in args.parts:
        print(f"\n## freshness: served sample age at a 1 s interval, 20 pods, {args.seconds:g} s per mode")
        asyncio.run(bench_freshness(args.seconds, 20, align=True))
        asyncio.run(bench_freshness(args.seconds, 20, align=False))
        asyncio.run(bench_freshness(args.seconds, 20, align=True, slow=True))
    if "memory" in args.parts:
        for pods in args.pods:
            bench_memory(pods)


if __name__ == "__main__":
    main()
