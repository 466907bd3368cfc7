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
from typing import Final, Protocol

import aiohttp

# A real model takes minutes to load (weights to GPU, compilation, CUDA graphs); beyond this it is stuck.
READY_TIMEOUT_SECONDS: Final = 1800.0
STOP_GRACE_SECONDS: Final = 30.0
_POLL_SECONDS: Final = 0.2
# A group of zombies nobody reaps still answers kill(0): wait this long at most for it to go.
_GROUP_GONE_SECONDS: Final = 5.0
_TAIL_LINES: Final = 12
_PLACEHOLDERS: Final = ("{port}", "{gpu}")
#: The flag an emulator's command carries its time scale in (`vllm-autoscale emulate --time-scale`).
TIME_SCALE_FLAG: Final = "--time-scale"
#: Wall seconds without an answer from `/health` after which a running engine counts as gone: long
#: enough that a real engine busy with a full batch answers (its API server is a separate process
#: from the engine core), short against a measuring step.
UNRESPONSIVE_AFTER_SECONDS: Final = 20.0


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


class Engine(Protocol):
    """What a run needs of an engine: an `EngineProcess`, or an emulator in this process
    (`lab.emulate.in_process`)."""

    url: str

    @property
    def command(self) -> str: ...

    @property
    def running(self) -> bool: ...

    def tail(self) -> str: ...

    async def start(self, session: aiohttp.ClientSession, ready_within: float) -> float: ...

    async def watch(self, session: aiohttp.ClientSession, unresponsive_after: float) -> str: ...

    async def stop(self) -> int | None: ...

    def kill_now(self) -> None: ...


def missing_port(template: str) -> str | None:
    """Why `template` cannot be an engine command: it has no `{port}` (two engines on one host would
    fight over a port); None when it has one."""
    if "{port}" in template:
        return None
    return f"the engine command {template!r} has no {{port}}: it must say where to listen"


def render(template: str, placement: Placement) -> list[str]:
    """The argv of a command template with `{port}` and `{gpu}` filled in.

    A template without `{port}` is refused: two engines on one host would otherwise fight over a port.
    """
    problem = missing_port(template)
    if problem is not None:
        raise EngineFailure(problem)
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
        """Wait until `/health` answers 200; the seconds since
        the start. `EngineFailure` if it exits or stalls."""
        if self.process is None or self.started_at is None:
            raise EngineFailure("the engine was never started")
        health = self.url + "/health"
        while time.monotonic() - self.started_at < ready_within:
            if self.process.returncode is not None:
                raise EngineFailure(
                    f"the engine exited with code {self.process.returncode} before it was ready (see "
                    f"{self.log})",
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
                    # A stopped engine (SIGSTOP, a debugger) holds SIGTERM pending: resume it to obey.
                    os.killpg(process.pid, signal.SIGCONT)
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

    async def watch(
        self, session: aiohttp.ClientSession, unresponsive_after: float = UNRESPONSIVE_AFTER_SECONDS
    ) -> str:
        """Return, with the reason, once the engine has exited or `/health` has not answered for
        `unresponsive_after` seconds (a stopped, hung or partitioned engine: SIGSTOP looks like this);
        run beside whatever uses the engine, so that a dead one is noticed at once, not by a timeout."""
        if self.process is None:
            raise EngineFailure("the engine was never started")
        exited = asyncio.ensure_future(self.process.wait())
        checks = asyncio.ensure_future(self._until_unresponsive(session, unresponsive_after))
        try:
            await asyncio.wait([exited, checks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (exited, checks):
                task.cancel()
            await asyncio.gather(exited, checks, return_exceptions=True)
        if self.process.returncode is not None:
            return f"the engine exited with code {self.process.returncode} while serving (see {self.log})"
        return f"the engine stopped answering /health for {unresponsive_after:g}s (see {self.log})"

    async def _until_unresponsive(self, session: aiohttp.ClientSession, after: float) -> None:
        """Check `/health` a few times in each `after` seconds; return once none answered for `after`."""
        health, every = self.url + "/health", after / 4
        last_answer = time.monotonic()
        while time.monotonic() - last_answer < after:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(health, timeout=aiohttp.ClientTimeout(total=every)) as response:
                    if response.status == 200:
                        last_answer = time.monotonic()
            await asyncio.sleep(min(every, _POLL_SECONDS * 5))

    def kill_now(self) -> None:
        """SIGKILL the group without waiting: for an interpreter exiting on an error or Ctrl-C."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)


def declared_time_scale(template: str) -> float | None:
    """The `--time-scale` an engine command gives its engine (`None`: none, a real engine's 1)."""
    try:
        words = shlex.split(template)
    except ValueError:
        return None
    for index, word in enumerate(words):
        if word == TIME_SCALE_FLAG and index + 1 < len(words):
            return _number(words[index + 1])
        if word.startswith(TIME_SCALE_FLAG + "="):
            return _number(word.split("=", 1)[1])
    return None


def time_scale_mismatch(template: str, time_scale: float, who: str, setting: str) -> str | None:
    """Why an engine command and the clock `who` reads it on disagree (`None` when they agree): an
    emulator run at one scale and measured at another reads every latency and rate wrong by the ratio.
    A command that declares no scale is taken at its word only for a real engine's 1."""
    declared = declared_time_scale(template)
    if declared is None or abs(declared - time_scale) <= 1e-9:
        return None
    return (
        f"engine command runs at {TIME_SCALE_FLAG} {declared:g} but {who} at {time_scale:g}: "
        f"give the same time scale to both ({setting})"
    )


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
