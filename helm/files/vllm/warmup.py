"""startupProbe of a vLLM container with warm-up on: healthy only once a first completion has succeeded.

The first request after a model load pays for kernel compilation and cache allocation; sending it here,
before the pod turns Ready, keeps that cost off user traffic. The probe runs until it succeeds once, so the
request is repeated only while it fails. Standard library only, because it runs inside the vLLM image.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--prompt", default="Hello")
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    base = f"http://127.0.0.1:{args.port}"

    try:
        with urllib.request.urlopen(f"{base}/health", timeout=args.timeout) as response:
            if response.status != 200:
                print(f"warm-up: /health answered {response.status}", file=sys.stderr)
                return 1
        body = json.dumps({"model": args.model, "prompt": args.prompt, "max_tokens": args.max_tokens})
        request = urllib.request.Request(
            f"{base}/v1/completions",
            data=body.encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=args.timeout) as response:
            choices = json.loads(response.read()).get("choices")
            if not choices:
                print("warm-up: the completion has no choices", file=sys.stderr)
                return 1
    except (urllib.error.URLError, OSError, ValueError) as error:
        print(f"warm-up: unable to complete a request: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
