"""The Prometheus HTTP API client: TLS, credentials, instant queries read within a deadline and a size.

An answer is read within the source timeout (connecting, the whole body and parsing) and up to
`max_body_bytes`, never buffered past it; credential files are re-read when they change.
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import aiohttp

from adapter.clock import after_pending_io
from adapter.config import PrometheusSettings
from adapter.errors import SourceUnavailable
from adapter.sources.prometheus_body import ResultReader, Steps, body_steps

# Read size of the body stream; the limit is checked after each chunk, so at most this much past it.
_CHUNK: Final = 64 * 1024
T = TypeVar("T")


async def _stepwise(steps: Steps[T]) -> T:
    """Run `steps` to its end, letting the event loop run other work (requests) at each of its yields."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        await after_pending_io()


class _SecretFile:
    """A credential file re-read whenever its modification time changes (rotated tokens)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._mtime: float | None = None
        self._value = ""

    def read(self) -> str:
        try:
            mtime = os.stat(self.path).st_mtime
            if mtime != self._mtime:
                with open(self.path, encoding="utf-8") as handle:
                    self._value = handle.read().strip()
                self._mtime = mtime
        except OSError as exc:
            raise SourceUnavailable(f"unable to read credential file {self.path!r}: {exc.strerror}") from exc
        return self._value


class PrometheusAPI:
    """`/api/v1/query` of one Prometheus-compatible server, over one connection pool."""

    def __init__(
        self, settings: PrometheusSettings, observe: Callable[[str, float], None] | None = None
    ) -> None:
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None
        self._token = _SecretFile(settings.bearer_token_file) if settings.bearer_token_file else None
        auth = settings.basic_auth
        self._password = _SecretFile(auth.password_file) if auth else None
        #: optional callback(outcome: str, seconds: float) for the adapter's upstream metrics
        self._observe = observe

    def _ssl_context(self) -> ssl.SSLContext | bool:
        s = self.settings
        if not s.url.startswith("https://"):
            return True
        if s.insecure_skip_verify:
            return False
        context = ssl.create_default_context(cafile=s.ca_file)
        if s.cert_file and s.key_file:
            context.load_cert_chain(s.cert_file, s.key_file)
        return context

    async def start(self) -> None:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._ssl_context(), limit=64)
            self._session = aiohttp.ClientSession(connector=connector)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", **self.settings.headers}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token.read()}"
        elif self.settings.basic_auth is not None and self._password is not None:
            credentials = f"{self.settings.basic_auth.username}:{self._password.read()}"
            headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
        return headers

    async def query(
        self, promql: str, at: float | None = None, reader: ResultReader | None = None
    ) -> tuple[str, Any]:
        """Run an instant query (at Unix time `at`, else Prometheus' now); return `(resultType, result)`.
        A `reader` may take the result's elements as they are decoded (`body_steps`)."""
        if self._session is None:
            await self.start()
        assert self._session is not None
        url = self.settings.url.rstrip("/") + "/api/v1/query"
        timeout = self.settings.timeout
        form = {"query": promql, "timeout": f"{timeout:g}s"}
        if at is not None:
            form["time"] = f"{at:.3f}"
        started = time.monotonic()
        outcome = "error"
        try:
            async with asyncio.timeout(timeout) as deadline:
                async with self._session.post(url, data=form, headers=self._headers()) as response:
                    body = await self._read(response, url)
                result = await _stepwise(body_steps(response.status, body, reader))
                # The last part of the parse may end past the deadline without meeting a yield.
                if (when := deadline.when()) is not None and asyncio.get_running_loop().time() > when:
                    raise TimeoutError
            outcome = "success"
            return result
        except TimeoutError as exc:
            outcome = "timeout"
            raise SourceUnavailable(f"query to {url} timed out after {timeout:g}s") from exc
        except aiohttp.ClientError as exc:
            raise SourceUnavailable(f"unable to query {url}: {exc.__class__.__name__}: {exc}") from exc
        finally:
            if self._observe is not None:
                self._observe(outcome, time.monotonic() - started)

    async def _read(self, response: aiohttp.ClientResponse, url: str) -> bytearray:
        """The whole body, or `SourceUnavailable` as soon as it exceeds `max_body_bytes` (the rest unread)."""
        limit = self.settings.max_body_bytes
        declared = response.content_length
        if declared is not None and declared > limit:
            response.close()
            raise SourceUnavailable(
                f"answer from {url} is {declared} bytes, more than prometheus.max_body_bytes ({limit})"
            )
        body = bytearray()
        async for chunk in response.content.iter_chunked(_CHUNK):
            body += chunk
            if len(body) > limit:
                # Closing drops the connection: the rest of the body is never read nor buffered.
                response.close()
                raise SourceUnavailable(
                    f"answer from {url} exceeds prometheus.max_body_bytes "
                    f"({limit} bytes); the rest was not read"
                )
        return body  # parsed as it is: a copy would double the memory of a large answer
