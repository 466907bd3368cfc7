"""`bench/pd_exactness.py`, issue 41's check of the adapter on a real P/D pair, run on an emulated one.

`vllm-autoscale emulate --pd 1:1` (a prefill and a decode server, the KV hand-over between them)
under a closed loop of prompts long enough that the prefill server queues them (2 ms a prompt
token, two batch slots, 400-1,600-token prompts from twelve clients), so that the backlog is not
zero, and outputs of 100-300 tokens at 20 ms a step, so that the decode server holds requests. The
check, a real process as on the GPU host, reads both servers through the adapter and compares each
answer with the pages of its scrape round parsed by `prometheus_client`; one 3-token request goes
first, as on the GPU host, where it made PromQL's increase() of the prompt histogram differ from
Δsum / Δcount (the adapter follows PromQL, and so must the check). The arithmetic of the check
itself is tested on written pages, so that a check that agreed with anything would fail here.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from lab.engine.placement import free_port
from tests.integration import procs

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "pd_exactness.py"
sys.path.insert(0, str(SCRIPT.parent))
import pd_exactness  # noqa: E402


async def _load(url: str, seconds: float) -> int:
    """Twelve closed-loop clients for `seconds`; the requests completed."""
    done = 0
    rng = random.Random(0)

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal done
        while True:
            prompt = [rng.randrange(1000) for _ in range(rng.choice([400, 1600]))]
            body = {"model": "m", "prompt": prompt, "max_tokens": rng.choice([100, 300]), "ignore_eos": True}
            async with session.post(url + "/v1/completions", json=body) as response:
                await response.read()
                done += response.status == 200

    async with aiohttp.ClientSession() as session:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(client(session) for _ in range(12))), seconds)
    return done


async def _one_request(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        body = {"model": "m", "prompt": [1, 2, 3], "max_tokens": 2}
        async with session.post(url + "/v1/completions", json=body) as response:
            assert response.status == 200, await response.text()


def _two_free_ports() -> int:
    """A free port whose successor is free too (`emulate --pd 1:1` listens on both): bound to check,
    since a port nobody listens on may still be a client's (the suite's clients take ephemeral ports)."""
    while True:
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port


def _up_or_gone(emulator: subprocess.Popen[bytes], port: int) -> bool:
    return emulator.poll() is not None or procs.http_get(f"http://127.0.0.1:{port}/health")[0] == 200


def _start_pair(command: list[str], log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`emulate --pd 1:1` on two free ports, started again on others when one was taken between the
    choice and the bind (a fresh clone's CI lost the decode port to another test's client once);
    returns the process and its first port once the decode server answers."""
    for _attempt in range(3):
        port = _two_free_ports()
        argv = [*command, "--base-port", str(port)]
        with log_path.open("wb") as log:
            emulator = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        procs.wait_for(functools.partial(_up_or_gone, emulator, port + 1), 30, what="the decode server")
        if emulator.poll() is None:
            return emulator, port
        if b"unable to bind" not in log_path.read_bytes():
            raise AssertionError(f"emulate exited: {log_path.read_text()[-2000:]}")
    raise AssertionError(f"three pairs of ports were taken before emulate bound them: {log_path.read_text()}")


def test_the_adapter_reads_an_emulated_pair_exactly(tmp_path: Path) -> None:
    flags = ["--pd", "1:1", "--kv-transfer-seconds", "0.05", "--max-num-seqs", "2"]
    flags += [
        "--step-per-prefill-token-seconds",
        "0.002",
        "--max-num-batched-tokens",
        "512",
        "--step-base-seconds",
        "0.02",
    ]
    command = [sys.executable, "-m", "adapter", "emulate", "--model", "m", *flags]
    emulator, port = _start_pair(command, tmp_path / "emulate.log")
    prefill, decode = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"
    try:
        # As on the GPU host: one short request before the check, so that the prompt histogram's
        # count starts above zero and PromQL's increase() is not Δsum / Δcount.
        asyncio.run(_one_request(decode))
        out = tmp_path / "exactness.json"
        flags = ["--prefill", prefill, "--decode", decode, "--model", "m", "--prefill-throughput", "500"]
        flags += ["--duration", "16", "--every", "1.5", "--out", str(out)]
        check = subprocess.Popen(
            [sys.executable, str(SCRIPT), *flags],
            stdout=subprocess.PIPE,
            text=True,
        )
        completed = asyncio.run(_load(decode, 20))
        printed, _ = check.communicate(timeout=30)
    finally:
        emulator.terminate()
        emulator.wait(timeout=10)
    # Load flowed through the pair: the first request is done by about 10 s (its prefill at 512 prompt
    # tokens a 1.04 s step, behind at most one other of at most 1,600 tokens, then at most 300 decode
    # steps of 20 ms); both pools near saturation (about 0.5 a second each) then finish 3-5 in 20 s
    # (measured on this machine: 4, 4 with the tick runner, 3, 3 with the event-driven one).
    assert completed >= 1, "the load completed requests through the pair"
    assert check.returncode == 0, printed
    summary = json.loads(out.read_text())["summary"]
    for signal, tally in summary.items():
        assert tally["answers"] >= 3 and tally["exact"] == tally["answers"], (signal, printed)
    # Before the first prompt finishes the backlog's prompt size is unknown: an error, never a guess.
    unknown = set(summary[pd_exactness.BACKLOG]["errors"])
    assert all("none finished in the last" in e for e in unknown), unknown
    assert summary[pd_exactness.BACKLOG]["nonzero"] >= 1, printed
    assert summary["decode:vllm_requests_running"]["nonzero"] >= 1, printed


PAGE = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m",engine="0"}} {running}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="m",engine="0"}} {waiting}
# TYPE vllm:request_prefill_kv_computed_tokens histogram
vllm:request_prefill_kv_computed_tokens_bucket{{model_name="m",engine="0",le="+Inf"}} {count}
vllm:request_prefill_kv_computed_tokens_sum{{model_name="m",engine="0"}} {total}
vllm:request_prefill_kv_computed_tokens_count{{model_name="m",engine="0"}} {count}
"""


def _page(running: int, waiting: int, count: int, total: float) -> pd_exactness.Series:
    text = PAGE.format(running=running, waiting=waiting, count=count, total=total)
    return pd_exactness.series(text, "m")


def test_the_checks_own_backlog_is_promqls_increase_over_the_window() -> None:
    """Held 2 + 3 requests. The window's pages: 101 of them a second apart, the first with 1 request of
    3 tokens (the GPU run's first request), the last with 101 requests of 1,003 tokens in all. PromQL:
    the count's increase of 100 extrapolates to the window's start only as far as the count's zero,
    100 s x 1 / 100 = 1 s before the first page (under 1.1 intervals: all of it), the sum's to
    100 s x 3 / 100,000 = 0.003 s; the end, 0 or 1.1 s after the last page, extrapolates both alike
    (1.1 s is at the 1.1-interval threshold: half an interval instead). So the mean is
    100,000 x (100.003 + e) / 100 / (100 x (101 + e) / 100) with e = 0 or 0.5: 990.129 or 990.225
    tokens, not the 1,000 of Δsum / Δcount."""
    first, last = (0.0, _page(0, 0, 1, 3.0)), (100.0, _page(2, 3, 101, 100_003.0))
    prefill = pd_exactness.Window(first, last, 101)
    decode = pd_exactness.Window((100.0, _page(4, 0, 0, 0.0)), (100.0, _page(4, 0, 0, 0.0)), 1)
    ends = pd_exactness.expected(pd_exactness.BACKLOG, prefill, decode, 500.0, 1.0)
    means = [value * 500.0 / 5 for value in ends]
    assert means == pytest.approx([100_000 * 100.003 / 101 / 100, 100_000 * 100.503 / 101.5 / 100])
    assert pd_exactness.inside(sum(ends) / 2, ends) and not pd_exactness.inside(5 * 1000 / 500.0, ends)
    assert pd_exactness.expected("decode:vllm_requests_running", prefill, decode, 500.0, 1.0) == [4.0]
    assert pd_exactness.expected("vllm_kv_fetch_requests", prefill, decode, 500.0, 1.0) == []  # absent
    idle = pd_exactness.Window(first, (100.0, _page(0, 0, 101, 100_003.0)), 101)
    assert pd_exactness.expected(pd_exactness.BACKLOG, idle, decode, 500.0, 1.0) == [0.0]
    assert not pd_exactness.close(10.0, 10.0 + 1e-6) and pd_exactness.close(10.0, 10.0 + 1e-12)
