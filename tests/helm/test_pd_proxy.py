"""files/pd-proxy/pd_proxy.py, the P/D proxy of a disaggregated model, run as its pod runs it (a python3
subprocess) in front of stand-in prefill and decode engines on ephemeral ports."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helm.conftest import CHART

SCRIPT = CHART / "files" / "pd-proxy" / "pd_proxy.py"
KV_PARAMS = {
    "do_remote_prefill": True,
    "remote_engine_id": "e1",
    "remote_block_ids": [1, 2],
    "remote_host": "10.0.0.7",
    "remote_port": 5600,
}


@dataclass
class Engine:
    """A stand-in vLLM engine: records what it was sent, answers as the role would."""

    role: str
    kv_params: dict[str, Any] | None = field(default_factory=lambda: dict(KV_PARAMS))
    received: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0
    slow_chunks: int = 0
    """Stream this many chunks 0.1 s apart instead of the short answer (a long generation)."""
    aborted: threading.Event = field(default_factory=threading.Event)
    """Set when a slow stream's reader closed the connection (vLLM then aborts the request)."""


def _serve(engine: Engine) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            engine.received.append(body)
            engine.headers.append(dict(self.headers))
            if engine.role == "prefill":
                answer: dict[str, Any] = {"choices": [{"text": "x"}]}
                if engine.kv_params is not None:
                    answer["kv_transfer_params"] = engine.kv_params
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if engine.slow_chunks:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for _ in range(engine.slow_chunks):
                        self.wfile.write(b"data: token\n\n")
                        self.wfile.flush()
                        time.sleep(0.1)
                except (BrokenPipeError, ConnectionResetError):
                    engine.aborted.set()
                return
            data = b"data: one\n\ndata: two\n\ndata: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    engine.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Engine, Engine, int]]:
    yield from _pair(tmp_path / "proxy.log")


def _pair(log: Path) -> Generator[tuple[Engine, Engine, int], None, None]:
    """Both stand-ins and the proxy in front of them (its stderr, the access log, to `log`)."""
    prefill, decode = Engine("prefill"), Engine("decode")
    servers = [_serve(prefill), _serve(decode)]
    port = _free_port()
    with log.open("wb") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(SCRIPT),
                f"--port={port}",
                f"--prefill=http://127.0.0.1:{prefill.port}",
                f"--decode=http://127.0.0.1:{decode.port}",
                "--timeout=10",
            ],
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the proxy did not start"
                time.sleep(0.05)
        yield prefill, decode, port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for server in servers:
            server.shutdown()


def _post(port: int, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "X-Request-Id": "req-1"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_prefill_then_decode_with_the_handed_over_kv(pair: tuple[Engine, Engine, int]) -> None:
    """Prefill gets one unstreamed token and do_remote_decode; decode gets the client's request with the
    prefill engine's kv_transfer_params; the client gets decode's stream; both steps share the id."""
    prefill, decode, port = pair
    body = {
        "model": "m",
        "prompt": "hi",
        "max_tokens": 50,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    status, answer = _post(port, body)
    assert status == 200 and answer == b"data: one\n\ndata: two\n\ndata: [DONE]\n\n"
    (sent_prefill,) = prefill.received
    assert sent_prefill["max_tokens"] == 1 and sent_prefill["stream"] is False
    assert "stream_options" not in sent_prefill
    assert sent_prefill["kv_transfer_params"]["do_remote_decode"] is True
    (sent_decode,) = decode.received
    assert sent_decode == {**body, "kv_transfer_params": KV_PARAMS}
    assert prefill.headers[0]["X-Request-Id"] == decode.headers[0]["X-Request-Id"] == "req-1"


def test_no_kv_params_is_an_error_not_a_recompute(pair: tuple[Engine, Engine, int]) -> None:
    """A prefill engine without a KV connector returns no kv_transfer_params: the proxy answers 502 with
    the reason instead of letting decode recompute the prompt unseen."""
    prefill, decode, port = pair
    prefill.kv_params = None
    status, answer = _post(port, {"model": "m", "prompt": "hi"})
    assert status == 502 and b"kv_transfer_params" in answer
    assert decode.received == []


def test_ready_only_with_both_pools(pair: tuple[Engine, Engine, int]) -> None:
    _, _, port = pair
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5) as response:
        assert response.status == 200


def test_a_client_that_leaves_mid_stream_closes_the_decode_request(tmp_path: Path) -> None:
    """A client that closes its connection mid-stream (a load test's level ending, a user's tab closed)
    ends the decode request: the proxy closes its connection to the decode engine, which is how vLLM
    learns to abort the request and free its KV cache, and logs one line. On the GPU host the proxy
    logged a second traceback per such request, from answering 502 on the closed socket."""
    log = tmp_path / "proxy.log"
    pairs = _pair(log)
    _, decode, port = next(pairs)
    try:
        decode.slow_chunks = 100  # 10 s of tokens
        body = json.dumps({"model": "m", "prompt": "hi", "max_tokens": 100, "stream": True}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            client.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            assert b"data: token" in client.recv(4096) + client.recv(4096)
        assert decode.aborted.wait(5), "the decode request outlived its client"
        deadline = time.monotonic() + 5
        while b"client went away" not in log.read_bytes():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        pairs.close()
    text = log.read_text()
    assert "Traceback" not in text and '" 502 -' not in text, text  # no 502 answered (a port may hold 502)
