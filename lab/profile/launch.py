"""`profile --launch "vllm serve ..."`: start the server, time it until ready (its cold start), stop it.

The process itself is the lab's engine process (`lab.engine.process`); this adapts its failures to the
profile's one-line `ProfileFailure`, with the log's last lines, and reads `--max-num-seqs` off the command.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import aiohttp

from lab.engine.process import READY_TIMEOUT_SECONDS, EngineFailure, EngineProcess, Placement
from lab.load.server import ProfileFailure

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
        self.engine: EngineProcess | None = None

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
        self.engine = EngineProcess(argv, Placement(urlsplit(url).port or 80), self.log, url=url)
        try:
            await self.engine.spawn()
            return await self.engine.wait_healthy(session, ready_within)
        except EngineFailure as error:
            # one line: the profile's failures are; the log it names holds the rest
            raise ProfileFailure(error.reason.replace("the engine", "the launched server", 1)) from error

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        return self.engine.process if self.engine is not None else None

    async def stop(self) -> None:
        """SIGTERM its process group, SIGKILL after a grace period; reaps it."""
        if self.engine is not None:
            await self.engine.stop()
