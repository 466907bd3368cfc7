"""The engine process: started from a template on a port (and GPU), awaited, stopped with its children.

The engines here are small Python servers standing in for `vllm serve` (no GPU on CI); the emulator as
an engine process is in tests/integration/test_engine_emulator.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from lab.engine.placement import free_port
from lab.engine.process import EngineFailure, EngineProcess, Placement, log_tail, render

# Loads for a moment, writes CUDA_VISIBLE_DEVICES to its log, starts a child that must die with it.
SERVER = """
import http.server, os, subprocess, sys, time
print("gpu", os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("child", child.pid, flush=True)
time.sleep(0.3)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""

# What vLLM's argument parser prints for a flag it does not know, then exits 2.
BAD_FLAG = """
import sys
print("INFO loading the engine", flush=True)
print("api_server.py: error: unrecognized arguments: --no-such-flag", file=sys.stderr, flush=True)
sys.exit(2)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_a_template_is_filled_with_port_and_gpu() -> None:
    argv = render("vllm serve m --port {port} --tag gpu{gpu}", Placement(8123, "3"))
    assert argv == ["vllm", "serve", "m", "--port", "8123", "--tag", "gpu3"]


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("vllm serve m", "has no {port}"),
        ("vllm serve 'm --port {port}", "unable to parse"),
    ],
)
def test_a_template_that_cannot_run_is_refused(template: str, reason: str) -> None:
    with pytest.raises(EngineFailure, match=reason):
        render(template, Placement(8000))


async def test_an_engine_is_timed_until_healthy_on_its_gpu_and_stopped_with_its_children(
    tmp_path: Path,
) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    placement = Placement(free_port(), "7")
    engine = EngineProcess.from_template(f"{sys.executable} {script} {{port}}", placement, tmp_path / "e.log")
    async with aiohttp.ClientSession() as session:
        try:
            cold_start = await engine.start(session, ready_within=30)
            assert engine.running
        finally:
            code = await engine.stop()
    assert cold_start >= 0.3
    assert engine.healthy_after == cold_start
    assert code is not None and not engine.running
    log = engine.log.read_text()
    assert "gpu 7" in log
    child = int(log.split("child ")[1].split()[0])
    assert not _alive(child), "the engine's child outlived the stop (it would hold the GPU)"


async def test_an_engine_that_exits_is_a_failure_with_the_logs_last_lines(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text(BAD_FLAG)
    engine = EngineProcess.from_template(
        f"{sys.executable} {script} {{port}}", Placement(free_port()), tmp_path / "e.log"
    )
    async with aiohttp.ClientSession() as session:
        with pytest.raises(EngineFailure) as raised:
            await engine.start(session, ready_within=30)
    assert raised.value.reason.startswith("the engine exited with code 2 before it was ready")
    assert "unrecognized arguments: --no-such-flag" in raised.value.log_tail
    assert raised.value.log_tail.splitlines()[0] == "INFO loading the engine"


async def test_an_engine_that_never_answers_is_stopped_after_its_deadline(tmp_path: Path) -> None:
    engine = EngineProcess(
        [sys.executable, "-c", "print('stuck loading', flush=True); import time; time.sleep(60)"],
        Placement(free_port()),
        tmp_path / "e.log",
    )
    async with aiohttp.ClientSession() as session:
        with pytest.raises(
            EngineFailure, match=r"was not ready at http://127.0.0.1:\d+/health after 1s"
        ) as raised:
            await engine.start(session, ready_within=1)
    assert "stuck loading" in raised.value.log_tail
    assert engine.process is not None and engine.process.returncode is not None


async def test_a_missing_binary_is_a_failure(tmp_path: Path) -> None:
    engine = EngineProcess.from_template(
        "no-such-vllm-binary --port {port}", Placement(1), tmp_path / "e.log"
    )
    with pytest.raises(EngineFailure, match="unable to start 'no-such-vllm-binary'"):
        await engine.spawn()


def test_the_tail_keeps_the_last_non_blank_lines(tmp_path: Path) -> None:
    log = tmp_path / "e.log"
    log.write_text("".join(f"line {i}\n\n" for i in range(30)))
    assert log_tail(log, 3).splitlines() == ["line 27", "line 28", "line 29"]
    assert log_tail(tmp_path / "absent.log") == ""


@pytest.mark.parametrize("fault", ["exits", "stops answering"])
async def test_a_watched_engine_that_dies_or_hangs_after_ready_is_reported_and_still_stopped(
    tmp_path: Path, fault: str
) -> None:
    """The watch returns its reason as soon as the process is gone, or once `/health` has not
    answered for its limit (SIGSTOP: the process lives, nothing answers); a stopped engine is
    resumed by its stop so that SIGTERM ends it without the whole grace."""
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    engine = EngineProcess.from_template(
        f"{sys.executable} {script} {{port}}", Placement(free_port()), tmp_path / "e.log"
    )
    async with aiohttp.ClientSession() as session:
        try:
            await engine.start(session, ready_within=30)
            assert engine.process is not None
            watching = asyncio.create_task(engine.watch(session, unresponsive_after=0.8))
            os.killpg(engine.process.pid, signal.SIGKILL if fault == "exits" else signal.SIGSTOP)
            reason = await asyncio.wait_for(watching, 30)
        finally:
            began = time.monotonic()
            await engine.stop(grace=20)
            stopped_within = time.monotonic() - began
    expected = "exited with code -9" if fault == "exits" else "stopped answering /health for 0.8s"
    assert expected in reason
    assert not engine.running and stopped_within < 10, "SIGTERM waited on a stopped process"
    child = int(engine.log.read_text().split("child ")[1].split()[0])
    assert not _alive(child)


async def test_a_healthy_engine_is_watched_without_a_false_alarm(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    engine = EngineProcess.from_template(
        f"{sys.executable} {script} {{port}}", Placement(free_port()), tmp_path / "e.log"
    )
    async with aiohttp.ClientSession() as session:
        try:
            await engine.start(session, ready_within=30)
            watching = asyncio.create_task(engine.watch(session, unresponsive_after=0.5))
            # Five limits long, every check answered: the watch is still waiting.
            done, _ = await asyncio.wait([watching], timeout=2.5)
            assert not done
            watching.cancel()
        finally:
            await engine.stop()
