"""Side by side: one engine per GPU (or GPU-less slot), the variants queued onto free placements.

Each variant's engine is started from the catalog's command with its flags, awaited until healthy,
asked every question for every seed (`measure`), and stopped; its log stays in `logs/<variant>.log`.
An engine that will not start (an unknown flag, out of memory, not healthy in time) or stops
answering is **blocked**, with the log's last lines as the reason, and the queue goes on. Stopping
the run (Ctrl-C, SIGTERM: the caller cancels `run`) stops every engine it started and keeps what
was measured: `outcomes` is the partial record's input at any moment.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import aiohttp

from lab.engine.placement import PlacementPool, free_port
from lab.engine.process import EngineFailure, EngineProcess, Placement
from lab.experiments.catalog import Catalog, Variant
from lab.experiments.measure import Questions, Repeat
from lab.experiments.probe import EngineProbe
from lab.profile.server import ProfileFailure

State = Literal["queued", "starting", "measuring", "done", "blocked", "stopped"]


@dataclass
class Outcome:
    """One variant's run: where, how it went, and what each seed measured."""

    variant: str
    command: str
    log: Path
    state: State = "queued"
    placement: str | None = None
    healthy_after: float | None = None
    """Real seconds from start until `/health` answered (its cold start)."""
    blocked: str | None = None
    """Why it could not run or be measured: one line, then the log's last lines."""
    repeats: list[Repeat] = field(default_factory=list)
    wall_seconds: float | None = None
    """Real seconds the placement was held, start to stop."""


def where(placement: Placement) -> str:
    return f"gpu {placement.gpu}" if placement.gpu is not None else f"slot :{placement.port}"


class Runner:
    """Runs a catalog's variants on a pool of placements; `outcomes` fills in as they go."""

    def __init__(self, catalog: Catalog, pool: PlacementPool, out: Path, say: Callable[[str], None]) -> None:
        self.catalog = catalog
        self.pool = pool
        self.out = out
        self.say = say
        self.outcomes: dict[str, Outcome] = {
            v.name: Outcome(v.name, catalog.command(v), out / "logs" / f"{v.name}.log") for v in self._order()
        }

    def _order(self) -> list[Variant]:
        """The variants asked the boundary first (they measure longest), then the catalog's order."""
        boundary = self.catalog.boundary.variants if self.catalog.boundary else ()
        return sorted(self.catalog.variants, key=lambda v: v.name not in boundary)

    async def run(self) -> dict[str, Outcome]:
        """Every variant, as many at once as there are placements."""
        connector = aiohttp.TCPConnector(limit=0)  # open-loop steps hold many streams at once
        async with aiohttp.ClientSession(connector=connector) as session:
            await asyncio.gather(
                *(self._variant(session, self.catalog.variant(name)) for name in self.outcomes)
            )
        return self.outcomes

    def _progress(self, outcome: Outcome, text: str) -> None:
        counts = {
            s: sum(1 for o in self.outcomes.values() if o.state == s) for s in ("queued", "measuring", "done")
        }
        self.say(f"[{outcome.placement}] {outcome.variant}: {text}  "
                 f"({counts['done']} done, {counts['measuring']} measuring, {counts['queued']} queued)")  # fmt: skip

    async def _variant(self, session: aiohttp.ClientSession, variant: Variant) -> None:
        outcome = self.outcomes[variant.name]
        async with self.pool.lease() as leased:
            # A fresh port for each engine: the last one's port may linger in TIME_WAIT after it
            # stopped (the emulator binds without SO_REUSEADDR and cannot listen there at once).
            placement = Placement(free_port(), leased.gpu)
            outcome.placement, outcome.state = where(leased), "starting"
            began = time.monotonic()
            engine: EngineProcess | None = None
            try:
                engine = EngineProcess.from_template(outcome.command, placement, outcome.log)
                self._progress(outcome, f"starting {engine.command}")
                outcome.healthy_after = await engine.start(session, self.catalog.engine.ready_within)
                outcome.state = "measuring"
                self._progress(outcome, f"healthy after {outcome.healthy_after:.1f}s")
                await self._measure(session, engine, outcome)
                outcome.state = "done"
                self._progress(outcome, "done")
            except EngineFailure as error:
                outcome.state, outcome.blocked = "blocked", _reason(error.reason, error.log_tail)
                self._progress(outcome, f"blocked: {error.reason}")
            except ProfileFailure as error:
                tail = engine.tail() if engine is not None and not engine.running else ""
                outcome.state, outcome.blocked = "blocked", _reason(f"unable to measure: {error}", tail)
                self._progress(outcome, f"blocked: {error}")
            except BaseException:
                outcome.state = "stopped"
                raise
            finally:
                await _stop(engine)
                outcome.wall_seconds = time.monotonic() - began

    async def _measure(self, session: aiohttp.ClientSession, engine: EngineProcess, outcome: Outcome) -> None:
        c = self.catalog
        probe = EngineProbe(session, engine.url, c.engine.model, c.slo, c.engine.time_scale,
                            c.measure.settle, c.measure.step)  # fmt: skip
        boundary = c.boundary is not None and outcome.variant in c.boundary.variants
        questions = Questions(c, probe, boundary, lambda text: self._progress(outcome, text))
        try:
            await probe.start(c.workload)
            for seed in c.seeds:
                outcome.repeats.append(Repeat(seed))
                await questions.run(seed, outcome.repeats[-1])
        finally:
            await probe.close()


async def _stop(engine: EngineProcess | None) -> None:
    """Stop the engine with its process group; killed at once if the stop itself is interrupted."""
    if engine is None:
        return
    try:
        await engine.stop()
    except BaseException:
        engine.kill_now()
        raise


def _reason(message: str, tail: str) -> str:
    return message if not tail else f"{message}\n{tail}"
