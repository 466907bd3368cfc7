"""An emulator engine started in this process, with the surface of `lab.engine.process.EngineProcess`.

`vllm-autoscale experiment --in-process` runs a catalog whose engine is the emulator
(`vllm-autoscale emulate ...`) with every engine in its own event loop, on virtual time
(`lab.virtual_time`): the engines serve HTTP on loopback ports as processes would, the measurement
is the same code, and time moves only when every part waits, so a catalog's verdicts follow from
the engines' parameters and the seeds, not from the CPU the machine had left. The engine command is
parsed with the emulator's own flags; a bad flag fails the start as the process would (exit code 2,
the parser's words in the log). An engine here cannot crash or hang on its own: `watch` returns only
once it is stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import shlex
from pathlib import Path

import aiohttp

from lab.emulate.cli import add_arguments, fleet_from, params_from
from lab.emulator.fleet import EmulatedFleet
from lab.emulator.params import EngineParams
from lab.engine.process import EngineFailure, Placement, log_tail, render
from lab.virtual_time import loop_time

EMULATE = "emulate"
"""The sub-command an in-process engine's command must run."""


def emulator_arguments(argv: list[str]) -> list[str]:
    """The flags after `emulate` in an engine command; `ValueError` if it does not run the emulator."""
    if EMULATE not in argv:
        raise ValueError(
            f"an in-process engine runs the emulator: the command must be `vllm-autoscale {EMULATE} ...`, "
            f"not {shlex.join(argv)!r}"
        )
    return argv[argv.index(EMULATE) + 1 :]


class InProcessEmulator:
    """An emulator engine of `argv` (an `emulate` command) at `placement`, its output in `log`."""

    def __init__(self, argv: list[str], placement: Placement, log: Path) -> None:
        self.argv = argv
        self.placement = placement
        self.log = log
        self.url = placement.url.rstrip("/")
        self.healthy_after: float | None = None
        self._fleet: EmulatedFleet | None = None
        self._stopped = asyncio.Event()

    @classmethod
    def from_template(cls, template: str, placement: Placement, log: Path) -> InProcessEmulator:
        return cls(render(template, placement), placement, log)

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    @property
    def running(self) -> bool:
        return self._fleet is not None and not self._stopped.is_set()

    def tail(self) -> str:
        return log_tail(self.log)

    def _say(self, line: str) -> None:
        with self.log.open("a", encoding="utf-8") as log:
            log.write(line + "\n")

    def _arguments(self) -> tuple[argparse.Namespace, EngineParams]:
        """The command's flags as the emulator reads them and the engine they make; a refusal is the
        process's exit code 2."""
        parser = argparse.ArgumentParser(prog=f"vllm-autoscale {EMULATE}")
        add_arguments(parser)
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                args = parser.parse_args(emulator_arguments(self.argv))
            params = params_from(args)
            if args.pd or args.replicas != 1:
                raise ValueError("an in-process engine is one server: no --pd, --replicas 1")
        except (SystemExit, ValueError) as error:
            message = errors.getvalue() or f"vllm-autoscale {EMULATE}: {error}\n"
            self._say(message.rstrip("\n"))
            raise EngineFailure(
                f"the engine exited with code 2 before it was ready (see {self.log})", self.tail()
            ) from None
        return args, params

    async def start(self, session: aiohttp.ClientSession, ready_within: float) -> float:
        """Serve and wait until Ready; the cold start in (loop) seconds. A taken port fails as a
        process's bind does, so that `lab.engine.ports` retries it on another."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.log.write_text("", encoding="utf-8")
        args, params = self._arguments()
        started = loop_time()
        fleet = fleet_from(args, params, host="127.0.0.1", base_port=self.placement.port, monotonic=loop_time)
        try:
            await fleet.start(1)
        except OSError as error:
            self._say(f"vllm-autoscale {EMULATE}: {error}")
            await fleet.stop()
            raise EngineFailure(
                f"the engine exited with code 1 before it was ready (see {self.log})", self.tail()
            ) from None
        self._fleet = fleet
        self._say(f"emulating vLLM {args.vllm_version} serving {fleet.model!r} at {self.url} (in process)")
        try:
            await asyncio.wait_for(fleet.replicas[0].wait_ready(), ready_within)
        except TimeoutError:
            await self.stop()
            raise EngineFailure(
                f"the engine was not ready at {self.url}/health after {ready_within:g}s (see {self.log})",
                self.tail(),
            ) from None
        self.healthy_after = loop_time() - started
        return self.healthy_after

    async def watch(self, session: aiohttp.ClientSession, unresponsive_after: float) -> str:
        """Return once the engine is stopped (nothing else ends an engine in this process)."""
        await self._stopped.wait()
        return f"the engine was stopped (see {self.log})"

    async def stop(self) -> int | None:
        """Stop serving; 0 (the exit code of a process that stopped cleanly), None if never started."""
        fleet, self._fleet = self._fleet, None
        if fleet is None:
            return None
        self._stopped.set()
        await fleet.stop()
        return 0

    def kill_now(self) -> None:
        """Nothing to kill: the engine ends with this process."""
