"""The P/D proxy of a disaggregated model: one OpenAI-compatible entry point in front of two pools.

A request is served in two steps, as vLLM's NixlConnector expects (its toy_proxy_server protocol):

1. to a prefill engine, with `max_tokens` 1, no streaming and `kv_transfer_params`
   `{"do_remote_decode": true}`: the engine computes the prompt's KV cache, keeps it for a decode
   engine to pull, and answers with the `kv_transfer_params` that say where it is;
2. to a decode engine, the client's own request with those `kv_transfer_params`: the engine pulls the
   KV cache from the prefill engine and generates; its answer (streamed or not) goes back as it is.

The pools are reached through their Services, one new connection per request, so kube-proxy spreads
requests over the ready pods of each pool and a terminating pod (draining its in-flight requests) gets
no new ones. `/health` says the proxy runs; `/ready` that both pools answer theirs, so the model's
Service has no ready endpoint while a pool has no ready pod. Standard library only: it runs in the vLLM
image (or any image with python3). A reference for one model, not a router: for prefix-aware routing or
many models use llm-d's router or Dynamo's frontend (disaggregation.proxy.enabled false).
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


class ClientGone(Exception):
    """The client closed its connection while its answer was relayed: nobody is left to answer."""


#: the request paths served in two steps; anything else is answered by the decode pool alone
GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions")
#: what the prefill step adds: compute the prompt here, hand the KV cache to a remote decode
PREFILL_KV_PARAMS: dict[str, Any] = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}


def prefill_request(body: dict[str, Any]) -> dict[str, Any]:
    """The prefill step's request: one token, not streamed, the KV cache kept for a remote decode."""
    request = dict(body)
    request["kv_transfer_params"] = dict(PREFILL_KV_PARAMS)
    request["stream"] = False
    request["max_tokens"] = 1
    if "max_completion_tokens" in request:
        request["max_completion_tokens"] = 1
    request.pop("stream_options", None)
    return request


def decode_request(body: dict[str, Any], kv_transfer_params: dict[str, Any]) -> dict[str, Any]:
    """The decode step's request: the client's, with where the prefill engine keeps its KV cache."""
    request = dict(body)
    request["kv_transfer_params"] = kv_transfer_params
    return request


class Backend:
    """One pool, reached through its Service: `http://host:port`."""

    def __init__(self, url: str, timeout: float) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"backend URL {url!r} must be http://host:port")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.timeout = timeout

    def connect(self) -> http.client.HTTPConnection:
        # A new connection per request: kube-proxy balances connections, not requests.
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def healthy(self) -> bool:
        connection = self.connect()
        try:
            connection.request("GET", "/health")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()


def make_handler(prefill: Backend, decode: Backend) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: the body of a streamed answer ends when the connection closes, so no length is needed.
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            sys.stderr.write("pd-proxy: " + format % args + "\n")

        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._reply(status, {"error": {"message": message, "type": "pd_proxy_error", "code": status}})

        def _relay(self, response: http.client.HTTPResponse) -> None:
            """Send a backend's answer on as it arrives (server-sent events included); `ClientGone` when
            the client closes its connection first."""
            try:
                self.send_response(response.status)
                for header in ("Content-Type", "Content-Length"):
                    value = response.getheader(header)
                    if value is not None:
                        self.send_header(header, value)
                self.end_headers()
                while chunk := response.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError) as error:
                raise ClientGone(str(error)) from error

        def do_GET(self) -> None:
            if self.path == "/health":
                self._reply(200, {"status": "ok"})
            elif self.path == "/ready":
                down = [
                    name for name, pool in (("prefill", prefill), ("decode", decode)) if not pool.healthy()
                ]
                if down:
                    self._error(503, f"no healthy {' and '.join(down)} engine behind the pool's Service")
                else:
                    self._reply(200, {"status": "ready"})
            else:
                self._forward(decode, "GET", None)

        def _forward(self, pool: Backend, method: str, body: bytes | None) -> None:
            connection = pool.connect()
            try:
                headers = {"Content-Type": "application/json"} if body is not None else {}
                connection.request(method, self.path, body=body, headers=headers)
                self._relay(connection.getresponse())
            except ClientGone as error:
                self.log_message("client went away (%s); closed the decode pool's connection", error)
            except OSError as error:
                self._error(502, f"decode pool unreachable: {error}")
            finally:
                connection.close()

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path not in GENERATION_PATHS:
                self._forward(decode, "POST", raw)
                return
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise ValueError("not a JSON object")
            except ValueError as error:
                self._error(400, f"request body must be a JSON object: {error}")
                return
            # One id for both steps, so the two engines' logs of a request can be matched.
            request_id = self.headers.get("X-Request-Id") or str(uuid.uuid4())
            headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
            connection = prefill.connect()
            try:
                connection.request("POST", self.path, json.dumps(prefill_request(body)), headers)
                response = connection.getresponse()
                answer = response.read()
                if response.status != 200:
                    # The client's own mistake (400) or the prefill engine's: pass it on unchanged.
                    self.send_response(response.status)
                    self.send_header("Content-Type", response.getheader("Content-Type") or "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                    return
                params = json.loads(answer).get("kv_transfer_params")
            except (OSError, ValueError) as error:
                self._error(502, f"prefill step failed: {error}")
                return
            finally:
                connection.close()
            if not isinstance(params, dict):
                # Without them the decode engine would recompute the prompt: say so instead of hiding it.
                self._error(
                    502, "the prefill engine returned no kv_transfer_params: is its --kv-transfer-config set?"
                )
                return
            connection = decode.connect()
            try:
                connection.request("POST", self.path, json.dumps(decode_request(body, params)), headers)
                self._relay(connection.getresponse())
            except ClientGone as error:
                # Closing the decode connection (finally) makes vLLM abort the request and free its KV.
                self.log_message("client went away (%s); closed the decode request %s", error, request_id)
            except OSError as error:
                self._error(502, f"decode step failed: {error}")
            finally:
                connection.close()

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--prefill", required=True, help="the prefill pool, http://host:port")
    parser.add_argument("--decode", required=True, help="the decode pool, http://host:port")
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds to wait for one backend answer"
    )
    args = parser.parse_args(argv)
    handler = make_handler(Backend(args.prefill, args.timeout), Backend(args.decode, args.timeout))
    server = ThreadingHTTPServer(("", args.port), handler)
    server.daemon_threads = True
    print(
        f"pd-proxy: port {args.port}, prefill {args.prefill}, decode {args.decode}",
        file=sys.stderr,
        flush=True,
    )
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
