"""The pieces of the alerting end-to-end test: a vLLM pod whose TPOT and finished requests advance in
real time from a real capture, webhook receivers standing in for the pager and the ticket queue, and a
day of TPOT history backfilled into Prometheus' TSDB with `promtool`."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from adapter.vocabulary import vllm
from tests.integration.procs import require_binary

TPOT = vllm.TPOT[0]
SUCCESS = vllm.REQUEST_SUCCESS[0]
BASELINE_TPOT = 0.02
BASELINE_RPS = 5.0


class VLLMPod:
    """The real vLLM exposition with its per-request TPOT histogram and finished-request counter
    advancing at a chosen rate and TPOT; every other line is served as captured."""

    def __init__(self, text: str, count: float, total: float) -> None:
        self._lines = text.splitlines()
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self.rps = BASELINE_RPS
        self.tpot = BASELINE_TPOT
        captured = dict(_samples(text))
        self.count = count
        self.sum = total
        # The capture's own observations (all <= 10 ms) plus the backfilled history's (at the baseline).
        self.buckets = {
            le: captured[f'{TPOT}_bucket{{le="{le}"}}']
            + (count - captured[f"{TPOT}_count"]) * (_le(le) >= BASELINE_TPOT)
            for le in _bucket_bounds(text)
        }
        self.finished = captured[f'{SUCCESS}{{finished_reason="stop"}}'] + count

    def observe(self, requests: float, tpot: float) -> None:
        """Record `requests` finished requests with the given TPOT."""
        self.count += requests
        self.sum += requests * tpot
        self.finished += requests
        for le in self.buckets:
            if tpot <= _le(le):
                self.buckets[le] += requests

    def set_load(self, rps: float, tpot: float, burst: float = 0.0) -> None:
        """From now on finish `rps` requests a second at `tpot`, after `burst` requests at once."""
        with self._lock:
            self._advance()
            self.rps, self.tpot = rps, tpot
            self.observe(burst, tpot)

    def _advance(self) -> None:
        now = time.monotonic()
        self.observe(self.rps * (now - self._last), self.tpot)
        self._last = now

    def page(self) -> str:
        with self._lock:
            self._advance()
            out = []
            for line in self._lines:
                name, labels, _ = _parse(line)
                if name == f"{TPOT}_bucket":
                    line = f"{name}{{{labels}}} {self.buckets[_label(labels, 'le')]!r}"
                elif name == f"{TPOT}_count":
                    line = f"{name}{{{labels}}} {self.count!r}"
                elif name == f"{TPOT}_sum":
                    line = f"{name}{{{labels}}} {self.sum!r}"
                elif name == SUCCESS and _label(labels, "finished_reason") == "stop":
                    line = f"{name}{{{labels}}} {self.finished!r}"
                out.append(line)
            return "\n".join(out) + "\n"


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")


def _parse(line: str) -> tuple[str, str, str]:
    match = _SAMPLE.match(line)
    return (match.group(1), match.group(2) or "", match.group(3)) if match else ("", "", "")


def _label(labels: str, key: str) -> str:
    match = re.search(rf'{key}="([^"]*)"', labels)
    return match.group(1) if match else ""


def _le(text: str) -> float:
    return float("inf") if text == "+Inf" else float(text)


def _bucket_bounds(text: str) -> list[str]:
    return [
        _label(labels, "le") for name, labels, _ in map(_parse, text.splitlines()) if name == f"{TPOT}_bucket"
    ]


def _samples(text: str) -> Iterator[tuple[str, float]]:
    """Samples keyed by name and the labels that tell them apart here (le, finished_reason)."""
    for name, labels, value in map(_parse, text.splitlines()):
        if name:
            keep = [f'{k}="{_label(labels, k)}"' for k in ("le", "finished_reason") if f'{k}="' in labels]
            yield (f"{name}{{{','.join(keep)}}}" if keep else name), float(value)


class Receiver:
    """Webhook receivers for the pager (`/pager`) and the ticket queue (`/ticket`) on one free port."""

    def __init__(self) -> None:
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        lock = threading.Lock()
        received = self.notifications

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with lock:
                    received.append((self.path, json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def alerts(self, path: str, status: str) -> list[dict[str, Any]]:
        """Every alert of the given status delivered to `path` so far."""
        return [
            a for p, n in list(self.notifications) if p == path for a in n["alerts"] if a["status"] == status
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def backfill(data_dir: Path, labels: str, end: float) -> tuple[float, float]:
    """Write 25 hours of TPOT history at the baseline, ending 61 minutes before `end`, into a TSDB;
    returns the counters' final (count, sum)."""
    step = 60
    start = end - 26 * 3600
    stop = end - 61 * 60
    lines = [f"# TYPE {TPOT}_count unknown", f"# TYPE {TPOT}_sum unknown"]
    count = total = 0.0
    ts = start
    points = []
    while ts <= stop:
        points.append((ts, count, total))
        count += BASELINE_RPS * step
        total += BASELINE_RPS * step * BASELINE_TPOT
        ts += step
    lines += [f"{TPOT}_count{{{labels}}} {c!r} {t:.3f}" for t, c, _ in points]
    lines += [f"{TPOT}_sum{{{labels}}} {s!r} {t:.3f}" for t, _, s in points]
    data_dir.mkdir(parents=True, exist_ok=True)
    source = data_dir.parent / "history.om"
    source.write_text("\n".join(lines) + "\n# EOF\n")
    result = subprocess.run(
        [require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return points[-1][1], points[-1][2]
