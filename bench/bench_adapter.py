"""Cached GET throughput and latency of the adapter against a bare aiohttp handler, in one run.

Both servers run as separate processes on loopback and answer the same bytes; the adapter goes
through its whole stack (routing, selector parsing, cache lookup, policy checks, telemetry, JSON),
the baseline returns a pre-built body. Results are printed as ratios to the baseline because these
machines are noisy. A second part counts upstream queries when 50 clients ask for one key at once.

    .venv/bin/python bench/bench_adapter.py [--seconds 5] [--rate 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapter.api.routes import value_list
from adapter.app import create_app
from adapter.config import load
from adapter.provider import MetricValue
from adapter.sources import Sample
from tests.fakes import FakeSource

PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/prod/vllm_requests_inflight"
SELECTOR = {"labelSelector": "model_name=llama"}


def _fresh_sample(*_: Any) -> Sample:
    return Sample(42.0, time.time(), 4)


def serve(kind: str, port: int) -> None:
    """Run one server until killed: the adapter (with a constant in-memory source) or the bare baseline."""
    if kind == "adapter":
        app = create_app(
            load("logging: {level: warning}"), source=FakeSource({"vllm_requests_inflight": _fresh_sample})
        )
    else:
        body = json.dumps(
            value_list(MetricValue("vllm_requests_inflight", {"model_name": "llama"}, 42, time.time(), 0))
        )

        async def bare(request: web.Request) -> web.Response:
            return web.Response(text=body, content_type="application/json")

        app = web.Application()
        app.router.add_get(PATH, bare)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


async def _wait_up(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(200):
            try:
                async with session.get(url + PATH, params=SELECTOR) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError(f"server at {url} did not come up")


async def closed_loop(url: str, seconds: float, concurrency: int = 16) -> float:
    """Requests per second with `concurrency` clients each sending back to back."""
    done = 0
    deadline = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                async with session.get(url + PATH, params=SELECTOR) as response:
                    await response.read()
                    assert response.status == 200
                done += 1

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.monotonic() - started)


async def wrk_throughput(url: str, seconds: float, connections: int = 16) -> float | None:
    """Requests per second measured by wrk (C, one thread), or None when wrk is not installed.

    A Python client saturates its own core before an aiohttp server does, which would hide the
    server's cost; wrk does not.
    """
    wrk = shutil.which("wrk")
    if wrk is None:
        return None
    process = await asyncio.create_subprocess_exec(
        *_pinned(1, wrk),
        "-t1",
        f"-c{connections}",
        f"-d{seconds:g}s",
        f"{url}{PATH}?labelSelector=model_name%3Dllama",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    for line in out.decode().splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    raise RuntimeError(f"unexpected wrk output: {out.decode()}")


async def open_loop(url: str, seconds: float, rate: float) -> list[float]:
    """Latencies (s) of requests sent at a fixed rate, whatever the previous ones are doing."""
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=256)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> None:
            started = time.perf_counter()
            async with session.get(url + PATH, params=SELECTOR) as response:
                await response.read()
            latencies.append(time.perf_counter() - started)

        tasks = []
        start = time.perf_counter()
        for i in range(int(seconds * rate)):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one()))
        await asyncio.gather(*tasks)
    return latencies


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def single_flight(clients: int = 50) -> tuple[int, int]:
    """Upstream fetches for `clients` simultaneous first requests of one key, and over one refresh after."""
    from aiohttp.test_utils import TestClient, TestServer

    source = FakeSource({"vllm_requests_inflight": _fresh_sample}, delay=0.05)
    app = create_app(load("prometheus: {refresh_interval: 1s, max_age: 5s}"), source=source)
    async with TestClient(TestServer(app)) as client:
        responses = await asyncio.gather(*(client.get(PATH, params=SELECTOR) for _ in range(clients)))
        assert all(r.status == 200 for r in responses)
        first = len(source.fetches)
        await asyncio.sleep(1.02)  # one refresh interval, then the same burst again
        await asyncio.gather(*(client.get(PATH, params=SELECTOR) for _ in range(clients)))
        return first, len(source.fetches) - first


def _pinned(cpu: int, *command: str) -> list[str]:
    """Pin a process to one CPU when taskset exists, so server and load generator do not trade cores."""
    taskset = shutil.which("taskset")
    return [taskset, "-c", str(cpu), *command] if taskset else list(command)


async def main(args: argparse.Namespace) -> None:
    urls: dict[str, str] = {}
    processes = []
    try:
        for kind in ("bare", "adapter"):
            port = _free_port()
            command = _pinned(0, sys.executable, __file__, "--serve", kind, "--port", str(port))
            processes.append(await asyncio.create_subprocess_exec(*command))
            urls[kind] = f"http://127.0.0.1:{port}"
            await _wait_up(urls[kind])
            await closed_loop(urls[kind], 1.0)  # warm-up
        # Interleaved rounds: a burst of noise from elsewhere hits both servers, not one.
        rounds: dict[str, list[float]] = {"bare": [], "adapter": []}
        for _ in range(args.rounds):
            for kind in ("bare", "adapter"):
                rps = await wrk_throughput(urls[kind], args.seconds) or await closed_loop(
                    urls[kind], args.seconds
                )
                rounds[kind].append(rps)
        latencies = {kind: await open_loop(url, args.seconds, args.rate) for kind, url in urls.items()}
    finally:
        for process in processes:
            process.terminate()
            await process.wait()
    ratios = [a / b for a, b in zip(rounds["adapter"], rounds["bare"], strict=True)]
    tool = (
        "wrk -t1 -c16"
        if shutil.which("wrk")
        else "aiohttp client, 16 connections (install wrk for a truer number)"
    )
    print(
        f"closed loop ({tool}), {args.rounds} interleaved "
        f"rounds of {args.seconds:g} s, server pinned to CPU 0:"
    )
    for kind in ("bare", "adapter"):
        print(f"  {kind:8} req/s per round: " + ", ".join(f"{r:.0f}" for r in rounds[kind]))
    print(
        f"  adapter / bare: median {statistics.median(ratios):.2f}x (rounds: "
        f"{', '.join(f'{r:.2f}' for r in ratios)}); goal >= 0.6x"
    )
    print(f"open loop at {args.rate:g} req/s, {args.seconds:g} s:")
    for kind in ("bare", "adapter"):
        values = latencies[kind]
        print(
            f"  {kind:8} p50 {statistics.median(values) * 1000:.2f} "
            f"ms  p99 {_pct(values, 0.99) * 1000:.2f} ms"
        )
    print(
        "  adapter p99 / bare p99: "
        f"{_pct(latencies['adapter'], 0.99) / _pct(latencies['bare'], 0.99):.2f}x; goal p99 <= 5 ms"
    )
    first, after = await single_flight()
    print(f"single flight: 50 concurrent first requests -> {first} upstream query; next refresh -> {after}")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", choices=["adapter", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve:
        serve(arguments.serve, arguments.port)
    else:
        asyncio.run(main(arguments))
