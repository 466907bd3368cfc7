"""files/vllm/drain.py and warmup.py, the preStop and startupProbe commands of vLLM pods, run as the kubelet
runs them (a python3 subprocess) against a stand-in vLLM server on an ephemeral port."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.helm.conftest import CHART

SCRIPTS = CHART / "files" / "vllm"


@dataclass
class FakeVLLM:
    """What the stand-in server answers; tests change it while a script runs."""

    health_status: int = 200
    completion_status: int = 200
    inflight: list[float] = field(default_factory=lambda: [0.0])
    completions: list[dict[str, object]] = field(default_factory=list)
    port: int = 0

    def exposition(self) -> str:
        running, waiting = self.inflight[0], 0.0
        if len(self.inflight) > 1:
            self.inflight.pop(0)
        return (
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            f'vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting} 1700000000000\n'
            'vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 7\n'
        )


@pytest.fixture
def vllm() -> Iterator[FakeVLLM]:
    state = FakeVLLM()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _reply(self, status: int, body: str) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body.encode())))
            self.end_headers()
            self.wfile.write(body.encode())

        def do_GET(self) -> None:
            if self.path == "/health":
                self._reply(state.health_status, "")
            elif self.path == "/metrics":
                self._reply(200, state.exposition())
            else:
                self._reply(404, "")

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.completions.append(body)
            self._reply(state.completion_status, json.dumps({"choices": [{"text": "hi"}]}))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )


def test_drain_waits_until_no_request_is_in_flight(vllm: FakeVLLM) -> None:
    """The drain polls until running + waiting reaches zero (timestamps and other families ignored)."""
    vllm.inflight = [3.0, 2.0, 1.0, 0.0]
    started = time.monotonic()
    result = _run("drain.py", f"--port={vllm.port}", "--settle=0", "--timeout=10", "--poll=0.05")
    assert result.returncode == 0
    assert "no requests in flight" in result.stderr
    assert vllm.inflight == [0.0]
    assert time.monotonic() - started < 8


def test_drain_gives_up_at_its_timeout(vllm: FakeVLLM) -> None:
    """With requests stuck, the drain stops at its timeout and still exits 0 (SIGTERM follows anyway)."""
    vllm.inflight = [5.0]
    started = time.monotonic()
    result = _run("drain.py", f"--port={vllm.port}", "--settle=0", "--timeout=0.3", "--poll=0.05")
    assert result.returncode == 0
    assert "5 requests still in flight" in result.stderr
    assert 0.3 <= time.monotonic() - started < 8


def test_drain_ends_when_vllm_is_gone() -> None:
    """Nothing listening means nothing to drain: the hook returns at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    result = _run("drain.py", f"--port={free_port}", "--settle=0", "--timeout=30", "--poll=0.05")
    assert result.returncode == 0
    assert "no longer answers" in result.stderr


def test_warmup_succeeds_after_one_completion(vllm: FakeVLLM) -> None:
    """A healthy server that completes the request passes the probe; the request names the served model."""
    result = _run("warmup.py", f"--port={vllm.port}", "--model=llama-8b", "--prompt=Hi", "--max-tokens=2")
    assert result.returncode == 0, result.stderr
    assert vllm.completions == [{"model": "llama-8b", "prompt": "Hi", "max_tokens": 2}]


@pytest.mark.parametrize(
    ("health", "completion"),
    [pytest.param(503, 200, id="engine dead"), pytest.param(200, 500, id="completion fails")],
)
def test_warmup_fails_until_serving_works(health: int, completion: int, vllm: FakeVLLM) -> None:
    """An unhealthy engine or a failing completion fails the probe, so the pod is not Ready yet."""
    vllm.health_status, vllm.completion_status = health, completion
    result = _run("warmup.py", f"--port={vllm.port}", "--model=m", "--timeout=5")
    assert result.returncode == 1
    assert "warm-up" in result.stderr
