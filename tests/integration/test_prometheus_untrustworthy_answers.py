"""Answers a real Prometheus never gives, through a real adapter process: each is a 503, never a value.

Future and NaN sample times cannot come from a real Prometheus: it never returns a sample dated after
its evaluation time, and its JSON has no NaN times. A Prometheus-compatible proxy or a broken backend
can answer them, so these rows use a fake upstream (a threaded HTTP server answering the query API,
the only stand-in here) behind a real `vllm-autoscale serve` process, and check the HTTP status the
HPA sees. The same situations from a real Prometheus are in test_prometheus_freshness.py.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from adapter.vocabulary.promql.combined import PART_LABEL, REF_LABEL
from tests.integration import procs
from tests.integration.test_prometheus_freshness import CONFIG

pytestmark = pytest.mark.integration

DAY = 86400.0


def _fake_answer(query: str) -> tuple[int, str]:
    """What the fake upstream answers, chosen by the namespace in the query."""
    now = time.time()
    namespace = re.search(r'namespace="([^"]+)"', query)
    if namespace is None:  # readiness ping
        return 200, json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [now, "1"]}})
    scenario = namespace.group(1)
    evaluated: float = now + DAY if scenario == "future" else now
    stamp = {"future": str(now + DAY), "nan-time": "NaN"}.get(scenario, str(now - 1))
    if scenario == "nan-evaluation":
        evaluated = math.nan
    rows = [
        {"metric": {PART_LABEL: "value"}, "value": [evaluated, "42"]},
        {"metric": {PART_LABEL: "count"}, "value": [evaluated, "1"]},
        {"metric": {PART_LABEL: "timestamp", REF_LABEL: "0"}, "value": [evaluated, stamp]},
    ]
    document = json.dumps({"status": "success", "data": {"resultType": "vector", "result": rows}})
    return (500 if scenario == "http-500" else 200), document


@pytest.fixture(scope="module")
def fake_upstream() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            status, body = _fake_answer(form["query"][0])
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def adapter_on_fake(
    fake_upstream: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """`vllm-autoscale serve --insecure-serving` as a real process, reading the fake upstream."""
    workdir = tmp_path_factory.mktemp("adapter")
    config = workdir / "config.yaml"
    config.write_text(CONFIG.format(url=fake_upstream))
    port = procs.free_port()
    with (workdir / "adapter.log").open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "adapter",
                "serve",
                "--config",
                str(config),
                "--insecure-serving",
                "--port",
                str(port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            procs.wait_for(lambda: procs.http_get(url + "/readyz")[0] == 200, 20, what="adapter readiness")
            yield url, workdir / "adapter.log"
        finally:
            process.terminate()
            process.wait(10)


@pytest.mark.parametrize(
    ("namespace", "status", "reason"),
    [
        pytest.param("fresh", 200, None, id="control: a current answer is a value"),
        pytest.param("future", 503, "ServiceUnavailable", id="a sample dated a day ahead is not fresh"),
        pytest.param("nan-time", 503, "ServiceUnavailable", id="a NaN sample time is 503, not 500"),
        pytest.param("nan-evaluation", 503, "ServiceUnavailable", id="a NaN evaluation time is 503, not 500"),
        pytest.param("http-500", 503, "ServiceUnavailable", id="a success body with HTTP 500 is not a value"),
    ],
)
def test_untrustworthy_answers_are_503(
    adapter_on_fake: tuple[str, Path], namespace: str, status: int, reason: str
) -> None:
    """What the HPA receives for answers a real Prometheus never gives; repeated, because a cached
    answer must stay refused (a future sample was once served on every read)."""
    path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/vllm_requests_waiting"
    url, log = adapter_on_fake
    for _ in range(3):
        code, body = procs.http_get(url + path, timeout=10)
        assert code == status, (body.decode(), log.read_text()[-3000:])
        document = json.loads(body)
        if reason is None:
            assert document["items"][0]["value"] == "42"
        else:
            assert document["reason"] == reason
