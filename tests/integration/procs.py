"""Real processes for integration tests: Prometheus, Alertmanager, and an exposition server.

Every launcher picks a free loopback port, polls readiness with a deadline, and is a context manager
that stops (and reaps) its process on exit, so a failing test leaves nothing running. A missing
binary raises, failing the test loudly: these tests never skip.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import yaml

from lab.engine.placement import free_port as free_port  # re-exported: the tests' one free port
from tests.waiting import (
    wait_for as wait_for,  # the synchronous wait, re-exported for the process helpers' callers
)

T = TypeVar("T")


def require_binary(name: str) -> str:
    """The path of a binary; fails the test (never skips) when it is missing."""
    path = shutil.which(name)
    if path is None:
        raise AssertionError(f"{name!r} is not installed; run scripts/install-tools (make tools)")
    return path


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """GET a URL and return (status, body) without raising on HTTP errors."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@dataclass
class Process:
    """A started server process and where it listens."""

    popen: subprocess.Popen[bytes]
    port: int
    workdir: Path
    args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; always reaps."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)

    def log(self) -> str:
        path = self.workdir / "process.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _start(args: list[str], port: int, workdir: Path, ready_path: str, timeout: float = 20.0) -> Process:
    log = (workdir / "process.log").open("wb")
    popen = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    process = Process(popen, port, workdir, args)
    try:

        def ready() -> bool:
            if popen.poll() is not None:
                raise AssertionError(f"{args[0]} exited with {popen.returncode}:\n{process.log()[-2000:]}")
            return http_get(process.url + ready_path)[0] == 200

        wait_for(ready, timeout, what=f"{Path(args[0]).name} readiness")
    except BaseException:
        process.stop()
        raise
    return process


@contextlib.contextmanager
def prometheus(
    workdir: Path,
    scrape_configs: list[dict[str, Any]],
    *,
    rule_files: list[Path] | None = None,
    alertmanager_url: str | None = None,
    scrape_interval: str = "1s",
    evaluation_interval: str = "1s",
    port: int | None = None,
    extra_args: tuple[str, ...] = (),
) -> Iterator[Process]:
    """A real Prometheus on 127.0.0.1 with the given scrape configs (and rules, and Alertmanager, and
    `extra_args` such as `--web.enable-remote-write-receiver`)."""
    binary = require_binary("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": evaluation_interval},
        "scrape_configs": scrape_configs,
    }
    if rule_files:
        config["rule_files"] = [str(p) for p in rule_files]
    if alertmanager_url:
        target = alertmanager_url.removeprefix("http://")
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [target]}]}]}
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = port or free_port()
    args = [
        binary,
        f"--config.file={workdir / 'prometheus.yml'}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-lifecycle",
        *extra_args,
    ]
    process = _start(args, port, workdir, "/-/ready")
    try:
        yield process
    finally:
        process.stop()


def restart(process: Process, timeout: float = 20.0) -> Process:
    """Start the same command again on the same port (after `stop`), in the same `Process` object.

    In place, so the context manager that started the process also stops its restarted self: a new
    object would leave the restarted server running after the test.
    """
    process.popen = _start(process.args, process.port, process.workdir, "/-/ready", timeout).popen
    return process


@contextlib.contextmanager
def alertmanager(workdir: Path, config: dict[str, Any]) -> Iterator[Process]:
    """A real Alertmanager on 127.0.0.1 without clustering."""
    binary = shutil.which("prometheus-alertmanager") or require_binary("alertmanager")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    args = [
        binary,
        f"--config.file={workdir / 'alertmanager.yml'}",
        f"--storage.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    process = _start(args, port, workdir, "/-/ready")
    try:
        yield process
    finally:
        process.stop()


class ExpositionServer:
    """A threaded HTTP server serving mutable Prometheus text pages at `/metrics` for several pods.

    Each pod gets its own port, so Prometheus sees them as separate targets. Pages are callables, so a
    test can change a pod's values between scrapes; a pod can be made to fail (HTTP 500) or vanish.
    """

    def __init__(self) -> None:
        self._servers: dict[str, ThreadingHTTPServer] = {}
        self._pages: dict[str, Callable[[], str]] = {}

    def add(self, pod: str, page: Callable[[], str]) -> int:
        """Serve `page()` for `pod`; returns the port."""
        self._pages[pod] = page
        pages = self._pages

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = pages[pod]().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._servers[pod] = server
        return int(server.server_address[1])

    def port(self, pod: str) -> int:
        return int(self._servers[pod].server_address[1])

    def remove(self, pod: str) -> None:
        """Stop serving a pod (its port then refuses connections)."""
        server = self._servers.pop(pod)
        server.shutdown()
        server.server_close()

    def close(self) -> None:
        for pod in list(self._servers):
            self.remove(pod)


@contextlib.contextmanager
def emulator(workdir: Path, flags: list[str]) -> Iterator[str]:
    """`python -m adapter emulate` serving model `m` on a free port with `flags` (time scale, engine);
    yields its URL once /health answers, and stops it on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [sys.executable, "-m", "adapter", "emulate", "--base-port", str(port), "--model", "m", *flags]
    with (workdir / "emulate.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"emulate exited: {(workdir / 'emulate.log').read_text()[-2000:]}")
            return http_get(url + "/health")[0] == 200

        wait_for(ready, 30, what="the emulator's /health")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def prometheus_query(url: str, promql: str) -> list[dict[str, Any]]:
    """Run an instant query against a real Prometheus and return its result list (vector)."""
    import json
    import urllib.parse

    data = urllib.parse.urlencode({"query": promql}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=data, timeout=5) as response:
        document = json.loads(response.read())
    assert document["status"] == "success", document
    result: list[dict[str, Any]] = document["data"]["result"]
    return result
