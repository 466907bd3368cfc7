"""One emulated vLLM server: an engine, its metrics registry, and its HTTP server with a cold start.

Like vLLM (`setup_server` binds early, uvicorn starts after the engine is built), the port is bound
at `start()` but not listening until the load delay has passed, so probes and scrapes get
"connection refused" while the model "loads"; then `/health` answers 200.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Sequence

from aiohttp import web

from lab.clock import ScaledClock
from lab.emulator.engine import Engine
from lab.emulator.metrics_page import EngineCollector, make_registry
from lab.emulator.params import EngineParams
from lab.emulator.request import Request
from lab.emulator.routes import Served, make_app
from lab.emulator.runner import EngineRunner


class ReplicaNotReady(Exception):
    """The replica is still loading or has stopped; it takes no requests."""


class EmulatedReplica:
    """An emulated vLLM server on `host:port` (port 0 picks a free one at `start()`).

    `load_delay` is in emulated seconds, like every duration here: the real wait is
    `clock.real(load_delay)`. Replicas sharing a `clock` share emulated time.
    """

    def __init__(
        self,
        *,
        model: str = "emulated-model",
        params: EngineParams | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        vllm_version: str = "0.33",
        load_delay: float = 0.0,
        clock: ScaledClock | None = None,
        seed: int = 0,
        engine_index: int = 0,
    ) -> None:
        if load_delay < 0:
            raise ValueError(f"load_delay {load_delay!r} must be >= 0")
        self.model = model
        self.host = host
        self.load_delay = load_delay
        self.clock = clock or ScaledClock()
        self.engine = Engine(params or EngineParams(), seed=seed, start=self.clock.now())
        self.collector = EngineCollector(self.engine, model, version=vllm_version, engine_index=engine_index)
        self.registry = make_registry(self.collector)
        self.runner = EngineRunner(self.engine, self.clock)
        self._port = port
        self._socket: socket.socket | None = None
        self._app_runner: web.AppRunner | None = None
        self._loading: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stopped = False
        self._app = make_app(Served(model, self.runner, self.registry, vllm_version))

    @property
    def port(self) -> int:
        """The bound port (known once `start()` returned)."""
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def metrics_url(self) -> str:
        return f"{self.url}/metrics"

    @property
    def ready(self) -> bool:
        """Listening and taking requests (the pod is Ready)."""
        return self._ready.is_set() and not self._stopped

    @property
    def inflight(self) -> int:
        """Requests accepted and not finished."""
        return self.runner.inflight

    async def start(self) -> None:
        """Bind the port, start the engine, and begin "loading"; returns at once (see `wait_ready`)."""
        if self._socket is not None:
            return
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((self.host, self._port))
        except OSError as error:
            sock.close()
            raise OSError(
                error.errno, f"unable to bind {self.host}:{self._port}: {error.strerror}"
            ) from error
        sock.setblocking(False)
        self._socket = sock
        self._port = int(sock.getsockname()[1])
        self.runner.start()
        self._loading = asyncio.create_task(self._load(), name=f"emulated-replica-{self._port}")

    async def _load(self) -> None:
        await asyncio.sleep(self.clock.real(self.load_delay))
        assert self._socket is not None
        # Handlers are answered (or aborted) before cleanup, so the shutdown wait is only a backstop.
        app_runner = web.AppRunner(self._app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await app_runner.setup()
        self._app_runner = app_runner
        # asyncio's create_server calls listen() on the bound socket: only now do connections succeed.
        await web.SockSite(app_runner, self._socket).start()
        self._ready.set()

    async def wait_ready(self) -> None:
        """Wait until the replica listens (bound it with `asyncio.timeout`)."""
        await self._ready.wait()

    async def complete(
        self, prompt: Sequence[int] | int, max_tokens: int | None = None, *, ignore_eos: bool = False
    ) -> Request:
        """Run one request directly (no HTTP) and return it finished; see `EngineRunner.complete`."""
        if not self.ready:
            raise ReplicaNotReady(f"replica {self.url} is not ready")
        return await self.runner.complete(prompt, max_tokens, ignore_eos=ignore_eos)

    async def stop(self, drain_timeout: float = 0.0) -> None:
        """Stop listening, let in-flight requests finish for up to `drain_timeout` emulated seconds,
        then abort the rest (they finish with `finish_reason == "abort"`); safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        if self._loading is not None:
            self._loading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loading
        if self._app_runner is not None:
            for site in list(self._app_runner.sites):
                await site.stop()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.clock.real(drain_timeout)):
                await self.runner.drained()
        await self.runner.stop()
        if self._app_runner is not None:
            await self._app_runner.cleanup()
        if self._socket is not None:
            self._socket.close()
