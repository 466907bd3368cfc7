"""One engine process: started from a command template on a GPU and a port, awaited, stopped, logged.

The command runs in its own session so that stopping it stops everything it started (vLLM forks an
engine core and API-server processes, which would otherwise keep holding the GPU). Its output goes to a
log file; when it exits or never becomes healthy, the log's last lines are the reason, because that is
where vLLM says "unrecognized arguments" or "CUDA out of memory".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import aiohttp

# A real model takes minutes to load (weights to GPU, compilation, CUDA graphs); beyond this it is stuck.
READY_TIMEOUT_SECONDS: Final = 1800.0
STOP_GRACE_SECONDS: Final = 30.0
_POLL_SECONDS: Final = 0.2
# A group of zombies nobody reaps still answers kill(0): wait this long at most for it to go.
_GROUP_GONE_SECONDS: Final = 5.0
_TAIL_LINES: Final = 12
_PLACEHOLDERS: Final = ("{port}", "{gpu}")


class EngineFailure(Exception):
    """An engine that would not start or become healthy: one line, then the log's last lines."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message if not log_tail else f"{message}\n{log_tail}")
        self.reason = message
        self.log_tail = log_tail


@dataclass(frozen=True)
class Placement:
    """Where one engine runs: its port on loopback and the GPU it is given (None: the host decides)."""

    port: int
    gpu: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def render(template: str, placement: Placement) -> list[str]:
    """The argv of a command template with `{port}` and `{gpu}` filled in.

    A template without `{port}` is refused: two engines on one host would otherwise fight over a port.
    """
    if "{port}" not in template:
        raise EngineFailure(f"the engine command {template!r} has no {{port}}: it must say where to listen")
    text = template.replace("{port}", str(placement.port)).replace("{gpu}", placement.gpu or "")
    try:
        argv = shlex.split(text)
    except ValueError as error:
        raise EngineFailure(f"unable to parse the engine command {template!r}: {error}") from error
    if not argv:
        raise EngineFailure("the engine command is empty")
    return argv


def log_tail(log: Path, lines: int = _TAIL_LINES) -> str:
    """The last non-blank lines of a log (empty when it does not exist)."""
    try:
        with log.open("rb") as file:
            kept = deque((line for line in file if line.strip()), maxlen=lines)
    except OSError:
        return ""
    return "".join(line.decode("utf-8", "replace") for line in kept).rstrip()


class EngineProcess:
    """An engine started from `argv` (see `render`) at `placement`, its output in `log`."""

    def __init__(
        self,
        argv: list[str],
        placement: Placement,
        log: Path,
        env: dict[str, str] | None = None,
        url: str | None = None,
    ) -> None:
        self.argv = argv
        self.placement = placement
        self.log = log
        self.url = (url or placement.url).rstrip("/")
        """Where it serves: the placement's port on loopback, unless the caller knows better (a proxy)."""
        self._env = env
        self.process: asyncio.subprocess.Process | None = None
        self.started_at: float | None = None
        """Monotonic time the process was started."""
        self.healthy_after: float | None = None
        """Seconds from start until `/health` first answered 200 (the engine's cold start)."""

    @classmethod
    def from_template(
        cls, template: str, placement: Placement, log: Path, env: dict[str, str] | None = None
    ) -> EngineProcess:
        return cls(render(template, placement), placement, log, env)

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def tail(self, lines: int = _TAIL_LINES) -> str:
        return log_tail(self.log, lines)

    async def spawn(self) -> None:
        """Start the process; `EngineFailure` when it cannot be executed at all."""
        env = {**os.environ, **(self._env or {})}
        if self.placement.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.placement.gpu
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.started_at = time.monotonic()
        with self.log.open("wb") as log:
            try:
                self.process = await asyncio.create_subprocess_exec(
                    *self.argv,
                    stdout=log,
                    stderr=asyncio.subprocess.STDOUT,
                    stdin=asyncio.subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            except OSError as error:
                raise EngineFailure(f"unable to start {self.argv[0]!r}: {error.strerror or error}") from error

    async def wait_healthy(
        self, session: aiohttp.ClientSession, ready_within: float = READY_TIMEOUT_SECONDS
    ) -> float:
        """Wait until `/health` answers 200; the seconds since the start. `EngineFailure` if it exits or stalls."""
        if self.process is None or self.started_at is None:
            raise EngineFailure("the engine was never started")
        health = self.url + "/health"
        while time.monotonic() - self.started_at < ready_within:
            if self.process.returncode is not None:
                raise EngineFailure(
                    f"the engine exited with code {self.process.returncode} before it was ready (see {self.log})",
                    self.tail(),
                )
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(health, timeout=aiohttp.ClientTimeout(total=2)) as response:
                    if response.status == 200:
                        self.healthy_after = time.monotonic() - self.started_at
                        return self.healthy_after
            await asyncio.sleep(_POLL_SECONDS)
        raise EngineFailure(
            f"the engine was not ready at {health} after {ready_within:g}s (see {self.log})", self.tail()
        )

    async def start(
        self, session: aiohttp.ClientSession, ready_within: float = READY_TIMEOUT_SECONDS
    ) -> float:
        """Spawn and wait until healthy; the cold start in seconds. Stops what it started on failure."""
        await self.spawn()
        try:
            return await self.wait_healthy(session, ready_within)
        except BaseException:
            await self.stop()
            raise

    async def stop(self, grace: float = STOP_GRACE_SECONDS) -> int | None:
        """SIGTERM the process group, SIGKILL after `grace`; reaps it. Its exit code (None: never started)."""
        process = self.process
        if process is None:
            return None
        if process.returncode is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)
                try:
                    await asyncio.wait_for(process.wait(), grace)
                    break
                except TimeoutError:
                    continue
        # The leader may be gone while a child it forked still holds the GPU: the group goes too, and
        # the stop returns once it has gone (a signal is delivered, not obeyed, when kill returns).
        deadline = time.monotonic() + _GROUP_GONE_SECONDS
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
            while time.monotonic() < deadline:
                await asyncio.sleep(_POLL_SECONDS / 4)
                os.killpg(process.pid, 0)
        return process.returncode

    def kill_now(self) -> None:
        """SIGKILL the group without waiting: for an interpreter exiting on an error or Ctrl-C."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
