"""preStop hook of a vLLM container: wait until its in-flight requests have finished, within a bound.

Kubernetes removes a terminating pod from its EndpointSlices while this hook runs, so after a settle delay
no new requests arrive; the hook then polls vLLM's /metrics until running + waiting requests reach zero,
and only then lets the kubelet send SIGTERM. It always exits 0: a failed hook would only add an event,
and SIGTERM follows either way. Standard library only, because it runs inside the vLLM image.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request

INFLIGHT_FAMILIES = ("vllm:num_requests_running", "vllm:num_requests_waiting")


def inflight(text: str) -> float:
    """Sum of running and waiting requests over every engine in a Prometheus text exposition."""
    total = 0.0
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in INFLIGHT_FAMILIES:
            # The value follows the label set; an optional timestamp may follow the value.
            total += float(line.rsplit("}", 1)[-1].split()[0])
    return total


def fetch(url: str, timeout: float) -> str | None:
    """The exposition, or None when the server no longer answers (nothing left to drain)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body: bytes = response.read()
            return body.decode("utf-8", "replace")
    except (urllib.error.URLError, OSError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before polling starts")
    parser.add_argument("--timeout", type=float, default=120.0, help="longest wait for in-flight requests")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between polls")
    args = parser.parse_args(argv)
    url = f"http://127.0.0.1:{args.port}/metrics"

    time.sleep(args.settle)
    deadline = time.monotonic() + args.timeout
    while True:
        text = fetch(url, timeout=min(5.0, max(args.poll, 0.5)))
        if text is None:
            print("drain: vLLM no longer answers; nothing to wait for", file=sys.stderr)
            return 0
        remaining = inflight(text)
        if remaining == 0:
            print("drain: no requests in flight", file=sys.stderr)
            return 0
        if time.monotonic() >= deadline:
            print(f"drain: {remaining:g} requests still in flight after {args.timeout:g}s", file=sys.stderr)
            return 0
        time.sleep(args.poll)


if __name__ == "__main__":
    sys.exit(main())
