"""GetMetrics latency of the KEDA external scaler against the HTTP API's, same cached key, one run.

One adapter process (`server.serve_config` with a KEDA port, as `serve --keda-port` runs it; an
in-memory source with a constant fresh sample, so nothing upstream is measured) answers both front
ends from one value cache, pinned to CPU 0; the clients (`grpcio` and `aiohttp`, one persistent
connection each, as KEDA and the aggregator keep theirs) run here, on CPU 1. Calls alternate between
the two front ends so noise on this shared machine hits both:

1. sequential: one call at a time, gRPC and HTTP in turn;
2. open loop: each front end at `--rate` calls/s, sends interleaved, regardless of answers.

Both are plain (`--insecure-serving` on loopback): TLS adds the same record encryption to both.

    .venv/bin/python bench/bench_keda.py [--calls 3000] [--seconds 10] [--rate 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapter import server
from adapter.config import load
from adapter.keda import externalscaler_pb2 as pb
from adapter.keda import externalscaler_pb2_grpc as rpc
from adapter.sources import Sample
from adapter.vocabulary.quantity import parse_quantity
from tests.fakes import FakeSource

METRIC = "vllm_requests_inflight"
PATH = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/prod/{METRIC}"
SELECTOR = {"labelSelector": "model_name=llama"}
REQUEST = pb.GetMetricsRequest(
    scaledObjectRef=pb.ScaledObjectRef(
        name="llama",
        namespace="prod",
        scalerMetadata={"metric": METRIC, "labelSelector": "model_name=llama", "target": "12"},
    ),
    metricName=METRIC,
)

Call = Callable[[], Awaitable[float]]


def serve(http_port: int, keda_port: int) -> None:
    """Run the adapter (both front ends, one cache) until killed."""
    config = load(f"server: {{insecure_serving: true, port: {http_port}}}\nlogging: {{level: warning}}")
    source = FakeSource({METRIC: lambda *_: Sample(42.0, time.time(), 4)})

    async def main() -> None:
        await server.serve_config(config, asyncio.Event(), source=source, keda=server.Keda(keda_port))

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pinned(cpu: int, *command: str) -> list[str]:
    taskset = shutil.which("taskset")
    return [taskset, "-c", str(cpu), *command] if taskset else list(command)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _line(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"  {name:5} n={len(ms):5}  p50 {statistics.median(ms):.3f} ms  p90 {_pct(ms, 0.9):.3f} ms  "
        f"p99 {_pct(ms, 0.99):.3f} ms  max {max(ms):.3f} ms"
    )


async def sequential(calls: dict[str, Call], count: int) -> dict[str, list[float]]:
    """`count` calls per front end, one at a time, alternating."""
    latencies: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(count):
        for name, call in calls.items():
            latencies[name].append(await call())
    return latencies


async def open_loop(calls: dict[str, Call], seconds: float, rate: float) -> dict[str, list[float]]:
    """Each front end at `rate` calls/s, their sends interleaved half a period apart."""
    latencies: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    period = 1.0 / rate
    tasks: list[asyncio.Task[None]] = []

    async def one(name: str) -> None:
        latencies[name].append(await calls[name]())

    start = time.perf_counter()
    for i in range(int(seconds * rate)):
        for j, name in enumerate(names):
            delay = start + i * period + j * period / len(names) - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(name)))
    await asyncio.gather(*tasks)
    return latencies


async def main(args: argparse.Namespace) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    http_port, keda_port = _free_port(), _free_port()
    command = _pinned(0, sys.executable, __file__, "--serve", str(http_port), str(keda_port))
    process = await asyncio.create_subprocess_exec(*command)
    try:
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session,
            grpc.aio.insecure_channel(f"127.0.0.1:{keda_port}") as channel,
        ):
            stub = rpc.ExternalScalerStub(channel)

            async def grpc_call() -> float:
                started = time.perf_counter()
                answer: Any = await stub.GetMetrics(REQUEST)
                elapsed = time.perf_counter() - started
                assert answer.metricValues[0].metricValueFloat == 42.0
                return elapsed

            async def http_call() -> float:
                started = time.perf_counter()
                async with session.get(f"http://127.0.0.1:{http_port}{PATH}", params=SELECTOR) as response:
                    body = await response.json()
                elapsed = time.perf_counter() - started
                assert parse_quantity(body["items"][0]["value"]) == 42.0
                return elapsed

            calls: dict[str, Call] = {"gRPC": grpc_call, "HTTP": http_call}
            deadline = time.monotonic() + 30
            while True:
                try:
                    await http_call()
                    await grpc_call()
                    break
                except (aiohttp.ClientError, grpc.aio.AioRpcError, KeyError):
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.1)
            await sequential(calls, 300)  # warm-up: connections, caches, code paths
            serial = await sequential(calls, args.calls)
            loaded = await open_loop(calls, args.seconds, args.rate)
    finally:
        process.terminate()
        await process.wait()

    print(f"sequential, {args.calls} calls per front end alternating, one connection each:")
    for name, values in serial.items():
        print(_line(name, values))
    ratio_p50 = statistics.median(serial["gRPC"]) / statistics.median(serial["HTTP"])
    ratio_p99 = _pct(serial["gRPC"], 0.99) / _pct(serial["HTTP"], 0.99)
    print(f"  gRPC / HTTP: p50 {ratio_p50:.2f}x, p99 {ratio_p99:.2f}x; goal <= 1.5x")
    print(f"open loop, {args.rate:g} calls/s per front end for {args.seconds:g} s, interleaved:")
    for name, values in loaded.items():
        print(_line(name, values))
    ratio_p50 = statistics.median(loaded["gRPC"]) / statistics.median(loaded["HTTP"])
    ratio_p99 = _pct(loaded["gRPC"], 0.99) / _pct(loaded["HTTP"], 0.99)
    print(f"  gRPC / HTTP: p50 {ratio_p50:.2f}x, p99 {ratio_p99:.2f}x; goal gRPC p99 <= 5 ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="sequential calls per front end")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the open-loop part")
    parser.add_argument("--rate", type=float, default=200.0, help="open-loop calls/s per front end")
    parser.add_argument(
        "--serve", nargs=2, type=int, metavar=("HTTP_PORT", "KEDA_PORT"), help=argparse.SUPPRESS
    )
    arguments = parser.parse_args()
    if arguments.serve:
        serve(*arguments.serve)
    else:
        asyncio.run(main(arguments))
