"""`profile --launch "vllm serve ..."`: start the server, time it until ready (its cold start), stop it.

The command runs in its own session, so stopping it stops everything it started (vLLM forks engine
and API-server processes); its output goes to a log file beside the profile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import time
from pathlib import Path
from typing import Final

import aiohttp

from lab.profile.server import ProfileFailure

# A real model takes minutes to load (download, weights to GPU, CUDA graphs); beyond this it is stuck.
READY_TIMEOUT_SECONDS: Final = 1800.0
_POLL_SECONDS: Final = 0.2
_STOP_GRACE_SECONDS: Final = 30.0
_MAX_NUM_SEQS: Final = re.compile(r"--max-num-seqs[= ](\d+)")


def max_num_seqs(command: str) -> int | None:
    """`--max-num-seqs` of a `vllm serve` command line, when it sets one."""
    match = _MAX_NUM_SEQS.search(command)
    return int(match.group(1)) if match else None


class Launched:
    """A server process started by the profile."""

    def __init__(self, command: str, log: Path) -> None:
        self.command = command
        self.log = log
        self.process: asyncio.subprocess.Process | None = None

    async def start(
        self, session: aiohttp.ClientSession, url: str, ready_within: float = READY_TIMEOUT_SECONDS
    ) -> float:
        """Start the command and wait until `url/health` answers 200; the real seconds that took."""
        try:
            argv = shlex.split(self.command)
        except ValueError as error:
            raise ProfileFailure(f"unable to parse --launch {self.command!r}: {error}") from error
        if not argv:
            raise ProfileFailure('--launch must be a command, e.g. "vllm serve MODEL --port 8000"')
        started = time.monotonic()
        with self.log.open("wb") as log:
            try:
                self.process = await asyncio.create_subprocess_exec(
                    *argv, stdout=log, stderr=asyncio.subprocess.STDOUT, start_new_session=True
                )
            except OSError as error:
                raise ProfileFailure(f"unable to start {argv[0]!r}: {error.strerror or error}") from error
        health = url.rstrip("/") + "/health"
        while time.monotonic() - started < ready_within:
            if self.process.returncode is not None:
                raise ProfileFailure(
                    f"the launched server exited with code {self.process.returncode} before it was ready (see {self.log})"
                )
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(health, timeout=aiohttp.ClientTimeout(total=2)) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            await asyncio.sleep(_POLL_SECONDS)
        raise ProfileFailure(
            f"the launched server was not ready at {health} after {ready_within:g}s (see {self.log})"
        )

    async def stop(self) -> None:
        """SIGTERM its process group, SIGKILL after a grace period; reaps it."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                await asyncio.wait_for(process.wait(), _STOP_GRACE_SECONDS)
                return
            except TimeoutError:
                continue
