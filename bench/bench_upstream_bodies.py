"""Huge upstream answers against a real adapter process: memory, liveness and answer time.

A fake upstream (a child process, so its own memory and CPU are not measured) answers the Prometheus
query API and serves a vLLM `/metrics` page; a control endpoint switches what it sends:

- `normal`: a small, valid answer (the baseline);
- `huge`: a 256 MiB body (a JSON document padded with one huge string; a proxy's runaway page);
- `json64`: a 64 MiB valid JSON vector of about 800 000 series (a runaway query's answer).

The adapter runs as `python -m adapter serve --insecure-serving` (from `--adapter-root`, default this
tree, so an older checkout can be measured the same way), once on the Prometheus source (refresh 1 s,
timeout 2 s) and once on the scrape source pointed at the fake `/metrics` (scrape-side limit
`scrape.max_body_bytes`). While the upstream misbehaves, the bench reads the adapter's RSS
(`/proc/<pid>/status`) every 0.2 s, times `GET /healthz` every 0.1 s, and asks for the metric with a
new label selector every 2 s (a new key waits for its first fetch, so this times one whole fetch).
Everything is reported as a ratio to the baseline phase of the same run.

    .venv/bin/python bench/bench_upstream_bodies.py [--phase-seconds 10] [--new-key-every 2]
        [--sources prometheus,scrape] [--adapter-root PATH] [--env NAME=VALUE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
PAGE = (ROOT / "tests" / "data" / "metrics-idle.prom").read_bytes()


# ---- the fake upstream (child process) ----------------------------------------------------------


def _small_vector() -> bytes:
    now = time.time()
    rows = [
        {"metric": {"adapter_part": "value"}, "value": [now, "3"]},
        {"metric": {"adapter_part": "count"}, "value": [now, "1"]},
        {"metric": {"adapter_part": "timestamp", "adapter_ref": "0"}, "value": [now, str(now - 1)]},
    ]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": rows}}).encode()


def _padded_json(size: int) -> list[bytes]:
    """A valid JSON document of `size` bytes, as chunks: a success answer padded with one huge string."""
    head = b'{"status":"success","data":{"resultType":"vector","result":[]},"padding":"'
    filler = b"x" * MIB
    chunks, left = [head], size - len(head) - 2
    while left > 0:
        chunks.append(filler[: min(left, MIB)])
        left -= MIB
    return [*chunks, b'"}']


def _json_vector(size: int) -> bytes:
    """A valid JSON vector of about `size` bytes: many small series, as a runaway query returns."""
    now = time.time()
    row = '{"metric":{"namespace":"prod","pod":"pod-%07d"},"value":[%.3f,"1"]}'
    rows, total, i = [], 0, 0
    while total < size:
        text = row % (i, now)
        rows.append(text)
        total += len(text) + 1
        i += 1
    return ('{"status":"success","data":{"resultType":"vector","result":[' + ",".join(rows) + "]}}").encode()


def _junk_page(size: int) -> list[bytes]:
    lines = b"".join(b'junk_series{i="%d"} 1\n' % i for i in range(40000))
    return [PAGE] + [lines] * (size // len(lines))


def serve_fake(port: int) -> None:
    """Run the fake upstream on `port` until killed."""
    state = {"mode": "normal"}
    huge, page64 = _padded_json(256 * MIB), _json_vector(64 * MIB)
    junk = _junk_page(256 * MIB)

    async def stream(request: web.Request, chunks: list[bytes], content_type: str) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        try:
            for chunk in chunks:
                await response.write(chunk)
        except ConnectionError:
            pass  # the adapter hung up: that is what a bounded reader does
        return response

    async def query(request: web.Request) -> web.StreamResponse:
        await request.post()
        if state["mode"] == "huge":
            return await stream(request, huge, "application/json")
        if state["mode"] == "json64":
            return await stream(request, [page64], "application/json")
        return web.Response(body=_small_vector(), content_type="application/json")

    async def metrics(request: web.Request) -> web.StreamResponse:
        if state["mode"] == "huge":
            return await stream(request, junk, "text/plain")
        return web.Response(body=PAGE, content_type="text/plain")

    async def mode(request: web.Request) -> web.Response:
        state["mode"] = request.query["set"]
        return web.Response(text=state["mode"])

    app = web.Application()
    app.router.add_post("/api/v1/query", query)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/mode", mode)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


# ---- the measuring side ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def _wait_http(session: aiohttp.ClientSession, url: str, deadline: float = 30) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            async with session.get(url) as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {deadline}s")


async def _phase(
    session: aiohttp.ClientSession, adapter: str, pid: int, seconds: float, new_key_every: float
) -> dict[str, Any]:
    """Probe the adapter for `seconds`: RSS, /healthz latency, and whole-fetch answers for new keys."""
    rss: list[float] = []
    health: list[float] = []
    answers: list[tuple[int, float]] = []
    end = time.monotonic() + seconds

    async def probe_rss() -> None:
        while time.monotonic() < end:
            rss.append(_rss_mib(pid))
            await asyncio.sleep(0.2)

    async def probe_health() -> None:
        while time.monotonic() < end:
            started = time.perf_counter()
            async with session.get(adapter + "/healthz") as response:
                await response.read()
            health.append(time.perf_counter() - started)
            await asyncio.sleep(0.1)

    async def probe_answers() -> None:
        while time.monotonic() < end:
            path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/prod/vllm_requests_waiting"
            started = time.perf_counter()
            # Matches the served page's series, and is a new key every time.
            selector = f"model_name=llama-1b-dummy,probe!=p{time.monotonic_ns()}"
            async with session.get(adapter + path, params={"labelSelector": selector}) as response:
                await response.read()
                answers.append((response.status, time.perf_counter() - started))
            await asyncio.sleep(new_key_every)

    await asyncio.gather(probe_rss(), probe_health(), probe_answers())
    return {"rss": rss, "health": health, "answers": answers}


def _row(name: str, phase: dict[str, Any], base: dict[str, Any]) -> str:
    rss_mean, rss_max = statistics.mean(phase["rss"]), max(phase["rss"])
    base_rss = statistics.mean(base["rss"])
    base_health = max(base["health"])
    statuses = sorted({status for status, _ in phase["answers"]})
    slowest = max(seconds for _, seconds in phase["answers"])
    return (
        f"  {name:<26} RSS mean {rss_mean:7.0f} MiB ({rss_mean / base_rss:5.2f}x)  max {rss_max:7.0f} MiB "
        f"({rss_max / base_rss:5.2f}x)   /healthz max {max(phase['health']) * 1000:7.1f} ms "
        f"({max(phase['health']) / base_health:6.1f}x)   answers {statuses} slowest {slowest:5.2f} s"
    )


async def measure(
    args: argparse.Namespace, source: str, faults: list[str], fake: str, adapter: str, pid: int
) -> None:
    """Baseline, then each fault followed by a recovery phase, each printed against the baseline."""

    async def phase() -> dict[str, Any]:
        return await _phase(session, adapter, pid, args.phase_seconds, args.new_key_every)

    async def switch(mode: str) -> None:
        async with session.get(fake + f"/mode?set={mode}") as response:
            await response.read()

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        await _wait_http(session, fake + "/mode?set=normal")
        await _wait_http(session, adapter + "/readyz")
        print(f"{source} source (adapter from {args.adapter_root}):")
        base = await phase()
        print(_row("baseline", base, base))
        for fault in faults:
            await switch(fault)
            print(_row(f"{fault} upstream", await phase(), base))
            await switch("normal")
            print(_row(f"after {fault} ({args.phase_seconds:g} s)", await phase(), base))


def scenario(args: argparse.Namespace, source: str, faults: list[str]) -> None:
    """Start the fake upstream and the adapter, measure, and stop both (killed if SIGTERM is ignored)."""
    fake_port, adapter_port = _free_port(), _free_port()
    fake_url = f"http://127.0.0.1:{fake_port}"
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(
            f"source: {source}\n"
            f"prometheus: {{url: '{fake_url}', refresh_interval: 1s, timeout: 2s, max_age: 90s}}\n"
            f"scrape: {{targets: ['{fake_url}/metrics'], namespace: prod, interval: 1s, timeout: 0.8s}}\n"
            # Probe keys (a new selector every 2 s) expire soon: two or three keys refresh at any time.
            "cache: {idle_timeout: 3s}\n"
            "logging: {level: error}\n"
        )
        env = {**os.environ, "PYTHONPATH": str(args.adapter_root), **dict(v.split("=", 1) for v in args.env)}
        processes = [
            subprocess.Popen([sys.executable, __file__, "--serve-fake", str(fake_port)]),
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "adapter",
                    "serve",
                    "--config",
                    str(config),
                    "--insecure-serving",
                    "--port",
                    str(adapter_port),
                ],
                cwd=args.adapter_root,
                env=env,
            ),
        ]
        try:
            adapter = f"http://127.0.0.1:{adapter_port}"
            asyncio.run(measure(args, source, faults, fake_url, adapter, processes[1].pid))
        finally:
            for process in reversed(processes):
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    print(f"  (pid {process.pid} ignored SIGTERM for 30 s; killed)")
                    process.kill()
                    process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase-seconds", type=float, default=10.0)
    parser.add_argument("--new-key-every", type=float, default=2.0, help="seconds between new selectors")
    parser.add_argument("--adapter-root", type=Path, default=ROOT)
    parser.add_argument("--sources", default="prometheus,scrape")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the adapter process")
    parser.add_argument("--serve-fake", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.serve_fake)
        return
    for source in args.sources.split(","):
        faults = ["huge", "json64"] if source == "prometheus" else ["huge"]
        scenario(args, source, faults)


if __name__ == "__main__":
    main()
