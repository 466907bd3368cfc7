"""Side by side: one engine per GPU (or GPU-less slot), the variants queued onto free placements.

Each variant's engine is started from the catalog's command with its flags, awaited until healthy,
asked every question for every seed (`measure`), and stopped; its log stays in `logs/<variant>.log`.
Every failure is caught where it happens, recorded with its reason and the log's last lines, and
the rest of the run goes on:

* an engine that will not start (an unknown flag, out of memory, not healthy in time) is **blocked**;
  one whose port was taken before it bound it is started again on another (`lab.engine.ports`);
* an engine that exits or stops answering while measured (`EngineProcess.watch`) is **failed**: the
  seeds it finished are kept, the rest never run;
* a seed whose measurement raises (it completed nothing at saturation, too many requests failed, an
  error of the harness) is that seed's failure (`Repeat.failed`); the engine, still alive, goes on
  with the next seed.

Stopping the run (Ctrl-C, SIGTERM: the caller cancels `run`) stops every engine it started and keeps
what was measured: `outcomes` is the partial record's input at any moment, and `finish` labels what
the stop left undone (**stopped** while measuring, **never run** while waiting for a GPU).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import aiohttp

from lab.engine.placement import PlacementPool
from lab.engine.ports import on_a_free_port
from lab.engine.process import Engine, EngineFailure, EngineProcess, Placement
from lab.experiments.catalog import Catalog, Variant
from lab.experiments.measure import Questions, Repeat
from lab.experiments.probe import EngineProbe
from lab.load.server import ProfileFailure
from lab.virtual_time import loop_time

EngineFactory = Callable[[str, Placement, Path], Engine]
"""Makes a variant's engine from its command template, placement and log (default: a process)."""
State = Literal["queued", "starting", "measuring", "done", "blocked", "failed", "stopped", "never run"]
# Seconds a failed measurement waits for the watch to say whether the engine itself is gone.
_GONE_WITHIN: Final = 2.0
#: States in which a variant has nothing more to do.
ENDED: Final = ("done", "blocked", "failed", "stopped", "never run")


@dataclass
class Outcome:
    """One variant's run: where, how it went, and what each seed measured."""

    variant: str
    command: str
    log: Path
    state: State = "queued"
    placement: str | None = None
    healthy_after: float | None = None
    """Seconds from start until `/health` answered (its cold start): real, or the loop's on virtual time."""
    blocked: str | None = None
    """Why it could not run or be measured (state `blocked` or `failed`): one line, then the log's last
    lines."""
    repeats: list[Repeat] = field(default_factory=list)
    wall_seconds: float | None = None
    """Seconds the placement was held, start to stop: real, or the loop's on virtual time."""
    notes: list[str] = field(default_factory=list)
    """What else happened to it (a port taken and retried)."""


def where(placement: Placement) -> str:
    return f"gpu {placement.gpu}" if placement.gpu is not None else f"slot :{placement.port}"


class Runner:
    """Runs a catalog's variants on a pool of placements; `outcomes` fills in as they go."""

    def __init__(
        self,
        catalog: Catalog,
        pool: PlacementPool,
        out: Path,
        say: Callable[[str], None],
        *,
        fixed_ports: bool = False,
        engines: EngineFactory = EngineProcess.from_template,
    ) -> None:
        self.catalog = catalog
        self.engines = engines
        self.pool = pool
        self.fixed_ports = fixed_ports
        """Start each engine on its placement's own port first (`--base-port`), else on a fresh one."""
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
        self.say(
            f"[{outcome.placement}] {outcome.variant}: {text}  "
            f"({counts['done']} done, {counts['measuring']} measuring, {counts['queued']} queued)"
        )

    async def _variant(self, session: aiohttp.ClientSession, variant: Variant) -> None:
        outcome = self.outcomes[variant.name]
        async with self.pool.lease() as leased:
            outcome.placement, outcome.state = where(leased), "starting"
            began = loop_time()
            started: list[Engine] = []
            try:

                async def start(port: int) -> Engine:
                    # A fresh port each attempt, held until the engine binds it (`lab.engine.ports`).
                    engine = self.engines(outcome.command, Placement(port, leased.gpu), outcome.log)
                    started.append(engine)
                    self._progress(outcome, f"starting {engine.command}")
                    outcome.healthy_after = await engine.start(session, self.catalog.engine.ready_within)
                    return engine

                engine = await on_a_free_port(
                    start,
                    preferred=leased.port if self.fixed_ports else None,
                    retried=lambda port, failure: self._retried(outcome, port),
                )
                outcome.state = "measuring"
                self._progress(outcome, f"healthy after {outcome.healthy_after:.1f}s")
                await self._watched(session, engine, outcome)
                outcome.state = "done"
                self._progress(outcome, "done")
            except EngineFailure as error:
                measured = outcome.state == "measuring"
                outcome.state, outcome.blocked = (
                    "failed" if measured else "blocked",
                    _reason(error.reason, error.log_tail),
                )
                self._progress(outcome, f"{outcome.state}: {error.reason}")
            except Exception as error:  # the harness's own error: this variant's failure, not the run's
                tail = started[-1].tail() if started and not started[-1].running else ""
                outcome.state, outcome.blocked = (
                    "blocked",
                    _reason(f"unable to measure: {_text(error)}", tail),
                )
                self._progress(outcome, f"blocked: {_text(error)}")
            except BaseException:
                outcome.state = "stopped"
                raise
            finally:
                if started:
                    await _stop(started[-1])
                outcome.wall_seconds = loop_time() - began

    def _retried(self, outcome: Outcome, port: int) -> None:
        outcome.notes.append(f"port {port} was taken before the engine bound it: started again on another")
        self._progress(outcome, outcome.notes[-1])

    async def _watched(self, session: aiohttp.ClientSession, engine: Engine, outcome: Outcome) -> None:
        """Measure while watching the engine: one that exits or stops answering ends the measuring at
        once (`EngineFailure` with its reason), instead of steps that wait on it until they time out."""
        measuring = asyncio.ensure_future(self._measure(session, engine, outcome))
        watching = asyncio.ensure_future(engine.watch(session, self.catalog.engine.unresponsive_after))
        try:
            await asyncio.wait([measuring, watching], return_when=asyncio.FIRST_COMPLETED)
            if measuring.done() and measuring.exception() is not None and not watching.done():
                # A request refused by a dead engine can fail the step before its exit is seen: the
                # engine's own reason, when it comes at once, is the truer one.
                await asyncio.wait([watching], timeout=_GONE_WITHIN)
        finally:
            for task in (measuring, watching):
                task.cancel()
            await asyncio.gather(measuring, watching, return_exceptions=True)
        if watching.done() and not watching.cancelled() and watching.exception() is None:
            raise EngineFailure(watching.result(), engine.tail())
        measuring.result()

    async def _measure(self, session: aiohttp.ClientSession, engine: Engine, outcome: Outcome) -> None:
        c = self.catalog
        probe = EngineProbe(
            session, engine.url, c.engine.model, c.slo, c.engine.time_scale, c.measure.settle, c.measure.step
        )
        boundary = c.boundary is not None and outcome.variant in c.boundary.variants
        questions = Questions(c, probe, boundary, lambda text: self._progress(outcome, text))
        try:
            await probe.start(c.workload)
            for seed in c.seeds:
                repeat = Repeat(seed)
                outcome.repeats.append(repeat)
                try:
                    await questions.run(seed, repeat)
                except Exception as error:  # this seed's failure; the engine goes on with the next
                    repeat.failed = _text(error)
                    self._progress(outcome, f"seed {seed} failed: {repeat.failed}")
                    if not engine.running:
                        raise EngineFailure("the engine exited while measured", engine.tail()) from error
        finally:
            await probe.close()

    def finish(self) -> None:
        """Label what a stopped run left undone: waiting for a GPU is **never run**, anything begun and
        not ended **stopped** (the seeds it finished are kept)."""
        for outcome in self.outcomes.values():
            if outcome.state == "queued":
                outcome.state = "never run"
            elif outcome.state not in ENDED:
                outcome.state = "stopped"


async def _stop(engine: Engine | None) -> None:
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


def _text(error: BaseException) -> str:
    """An exception in one line, its type where its message alone would not say what it is."""
    message = str(error).strip() or "no message"
    return message if isinstance(error, ProfileFailure) else f"{type(error).__name__}: {message}"
