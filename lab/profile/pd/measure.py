"""Measure a prefill-decode pair through its entry point: closed-loop levels, both engines' `/metrics` read.

Requests go where users send them (`url`: a P/D proxy, or an emulated decode server, which prefills on
its prefill server), so everything measured includes the P/D path. Each engine's page is read on a
timer (`MetricsReader`, one per role) and each level is a window of `clients` closed-loop clients:

1. **alone** (one client, the workload's prompt and output): the client's TTFT through the pair; the
   prefill engine's mean TTFT (a prompt's prefill alone); the decode engine's mean TTFT less its
   mean TPOT, the **KV hand-over** (a decode engine's TTFT runs from the request's arrival there,
   through the KV fetch, to the step that computes the last prompt token).
2. **prefill** (outputs of 2 tokens, so decode costs little; 2, 4, 8 ... clients): the prompt tokens
   per second the prefill engine finished (its TTFT count, each a prompt of the workload's length)
   until its queue stands and the rate stops growing by 5 %: the throughput through the path.
3. **decode** (the workload; 1, 2, 4 ... clients): the decode engine's running, TPOT and KV usage,
   until its TPOT passes the objective or its batch stops growing (its slots are full).

Prompts are random token ids (no prefix-cache hit). The windows are in the server's seconds.
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass, field
from typing import Final

import aiohttp

from lab.clock import ScaledClock
from lab.load.client import CompletionClient
from lab.load.metrics_reader import MetricsReader, Snapshot
from lab.load.workload import Sampler, Workload
from lab.profile.schema import PercentileSlo
from lab.virtual_time import loop_time

#: a level's share that settles before its window is read
_SETTLE: Final = 0.25
#: a queue stands when this many requests wait on average
_STANDING: Final = 1.0
_GROWTH: Final = 0.05
_MAX_CLIENTS: Final = 256


@dataclass(frozen=True)
class PdSettings:
    """What to measure: the entry point, each role's engine, the workload and the SLO."""

    url: str
    prefill_url: str
    decode_url: str
    model: str
    workload: Workload
    slo: PercentileSlo
    window: float = 20.0
    """Seconds (the server's) each level is measured over, after it settles."""
    budget: float = 600.0
    time_scale: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class Engine:
    """One engine over a window: means of its gauges, and its histograms' means over the window."""

    running: float
    waiting: float
    kv_usage: float
    finished_per_second: float
    """First tokens per second (Δ TTFT count): on a prefill engine, prompts prefilled per second."""
    ttft: float | None
    tpot: float | None


@dataclass(frozen=True)
class Level:
    clients: int
    output_tokens: int
    client_ttft: float | None
    prefill: Engine
    decode: Engine


@dataclass
class Measured:
    alone: Level | None = None
    prefill: list[Level] = field(default_factory=list)
    decode: list[Level] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _engine(snaps: list[Snapshot]) -> Engine:
    if len(snaps) < 2:
        raise RuntimeError("fewer than two reads of an engine's /metrics in a window: lengthen --pd-window")
    first, last = snaps[0], snaps[-1]
    ttft, tpot = last.ttft.minus(first.ttft), last.tpot.minus(first.tpot)
    return Engine(
        statistics.fmean(s.running for s in snaps),
        statistics.fmean(s.waiting for s in snaps),
        statistics.fmean(s.kv_usage for s in snaps),
        ttft.count / (last.at - first.at) if last.at > first.at else 0.0,
        ttft.mean,
        tpot.mean,
    )


class PairMeter:
    """Runs the levels against one pair (`measure`), on the running loop's clock."""

    def __init__(self, settings: PdSettings, session: aiohttp.ClientSession) -> None:
        self.s = settings
        self.clock = ScaledClock(settings.time_scale, monotonic=loop_time)
        self.client = CompletionClient(session, settings.url, settings.model, self.clock)
        self.readers = {
            role: MetricsReader(session, url, settings.model, self.clock, interval=0.25)
            for role, url in (("prefill", settings.prefill_url), ("decode", settings.decode_url))
        }
        self.sampler = Sampler(settings.workload, settings.seed)
        self.prompt = round(settings.workload.prompt_tokens.mean)
        self.output = round(settings.workload.output_tokens.mean)

    async def level(self, clients: int, output: int) -> Level:
        """`clients` closed-loop clients for a settle and a window; the window's means."""
        start = self.clock.now()
        settle = start + self.s.window * _SETTLE
        end = settle + self.s.window
        ttfts: list[float] = []

        async def one() -> None:
            while self.clock.now() < end:
                result = await self.client.complete(self.sampler.prompt(self.prompt), output)
                if result.error is not None:
                    raise RuntimeError(f"a request through {self.s.url} failed: {result.error}")
                if result.ttft is not None and result.sent >= settle:
                    ttfts.append(result.ttft)

        tasks = [asyncio.create_task(one()) for _ in range(clients)]
        try:
            await asyncio.sleep(self.clock.real(end - start))
        finally:
            for task in tasks:
                task.cancel()
            errors = await asyncio.gather(*tasks, return_exceptions=True)
        failed = [e for e in errors if isinstance(e, RuntimeError)]
        if failed:
            raise failed[0]
        p, d = (self.readers[r].between(settle, end) for r in ("prefill", "decode"))
        await asyncio.sleep(self.clock.real(2.0))  # what was cut off drains before the next level
        return Level(clients, output, statistics.fmean(ttfts) if ttfts else None, _engine(p), _engine(d))

    def _within_budget(self, started: float) -> bool:
        return self.clock.now() - started < self.s.budget

    async def measure(self) -> Measured:
        """The three phases (module docstring); what a spent budget left unmeasured is in `notes`."""
        out = Measured()
        for reader in self.readers.values():
            reader.start()
        started = self.clock.now()
        try:
            await asyncio.sleep(self.clock.real(1.0))
            out.alone = await self.level(1, self.output)
            clients = 2
            while clients <= _MAX_CLIENTS and self._within_budget(started):
                level = await self.level(clients, 2)
                out.prefill.append(level)
                rates = [x.prefill.finished_per_second for x in out.prefill]
                standing = level.prefill.waiting >= _STANDING
                if standing and len(rates) > 1 and rates[-1] < rates[-2] * (1 + _GROWTH):
                    break
                clients *= 2
            clients = 1
            while clients <= _MAX_CLIENTS and self._within_budget(started):
                level = await self.level(clients, self.output)
                out.decode.append(level)
                tpot = level.decode.tpot
                # The batch stopped growing with the clients: the engine's slots (or its KV cache) are full.
                # (Its waiting gauge is no sign: a decode engine counts requests fetching KV as waiting.)
                before = out.decode[-2].decode.running if len(out.decode) > 1 else 0.0
                if (tpot is not None and tpot > self.s.slo.tpot_seconds) or level.decode.running < before * (
                    1 + _GROWTH
                ):
                    break
                if level.prefill.waiting >= _STANDING:
                    out.notes.append(
                        f"the prefill engine's queue stood at {clients} clients of the workload: the decode "
                        "knee is at least the last level's (add prefill engines to measure past it)"
                    )
                    break
                clients *= 2
            if not self._within_budget(started):
                out.notes.append(f"the budget ({self.s.budget:g} s) ended the levels")
        finally:
            for reader in self.readers.values():
                await reader.stop()
        return out
