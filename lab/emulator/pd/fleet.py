"""A disaggregated (P/D) fleet of emulated vLLM servers: prefill replicas, decode replicas, the hand-over.

`DisaggregatedFleet(prefill=P, decode=D)` starts P prefill-role and D decode-role replicas on
consecutive ports (prefill first). A request sent to a decode replica (`/v1/completions`, or
`complete`) goes as llm-d's routing sidecar sends it: its prefill first, with `max_tokens=1`, on
a prefill replica (round-robin over the ready ones), then its decode on the decode replica after the
KV transfer (`lab.emulator.pd.engine`). Each role's `/metrics` is what that engine of a vLLM 0.33 P/D
pair exports: the prefill side an aggregated engine's page, the decode side also
`vllm:num_requests_kv_fetch_by_stage`, its deferred waiting requests and the prompt tokens received
(`prompt_tokens_by_source{source="external_kv_transfer"}`, external prefix-cache hits). Connector
families (`vllm:nixl_*`) are not emitted: the metrics contract names no member of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Literal

from prometheus_client.core import Metric

from adapter.vocabulary import vllm
from lab.clock import ScaledClock
from lab.emulator.engine import Engine
from lab.emulator.families import FAMILIES, EmittedFamily
from lab.emulator.metrics_page import EngineCollector, make_registry
from lab.emulator.params import EngineParams
from lab.emulator.pd.engine import DecodeEngine, PrefillEngine
from lab.emulator.replica import EmulatedReplica
from lab.emulator.request import Request
from lab.emulator.routes import Served, make_app
from lab.emulator.runner import EngineRunner

Role = Literal["prefill", "decode"]
ROLES: Final[tuple[Role, ...]] = ("prefill", "decode")
#: emulated seconds a request's KV takes from a prefill to a decode engine (one 8B prompt over NVLink: ms)
DEFAULT_TRANSFER_SECONDS: Final = 0.02
_KV_FETCH_HELP: Final = "Number of requests in each KV fetch stage."


def _decode(engine: Engine) -> DecodeEngine:
    assert isinstance(engine, DecodeEngine)
    return engine


def _deferred(engine: Engine) -> float:
    stages = _decode(engine).stages()
    return float(stages["waiting_to_start"] + stages["in_progress"])


# The decode engine's families that differ from an aggregated engine's (by name): requests still
# fetching are deferred waiting requests, and the prompt tokens received are the connector's.
_DECODE_READERS: Final[dict[str, Callable[[Engine], dict[tuple[str, ...], float]]]] = {
    vllm.NUM_REQUESTS_WAITING[0]: lambda e: {(): len(e.waiting) + _deferred(e)},
    "vllm:num_requests_waiting_by_reason": lambda e: {
        ("capacity",): float(len(e.waiting)),
        ("deferred",): _deferred(e),
    },
    "vllm:external_prefix_cache_queries_total": lambda e: {
        (): _decode(e).handover.external_prefix_cache_queries
    },
    "vllm:external_prefix_cache_hits_total": lambda e: {(): _decode(e).handover.external_prefix_cache_hits},
    "vllm:prompt_tokens_by_source_total": lambda e: {
        ("local_compute",): e.stats.prompt_tokens_local_compute,
        ("local_cache_hit",): e.stats.prompt_tokens_local_cache_hit,
        ("external_kv_transfer",): _decode(e).handover.prompt_tokens_external,
    },
    vllm.PROMPT_TOKENS_CACHED[0]: lambda e: {
        (): e.stats.prompt_tokens_local_cache_hit + _decode(e).handover.prompt_tokens_external
    },
    "vllm:prompt_tokens_cached_by_source_total": lambda e: {
        ("device",): e.stats.prompt_tokens_local_cache_hit,
        ("host",): 0.0,
        ("p2p",): _decode(e).handover.prompt_tokens_external,
        ("disk",): 0.0,
        ("external_unspecified",): 0.0,
    },
}
_KV_FETCH: Final = EmittedFamily(
    vllm.KV_FETCH_BY_STAGE[0],
    "gauge",
    _KV_FETCH_HELP,
    lambda e: {(stage,): float(n) for stage, n in _decode(e).stages().items()},
    ("stage",),
    new_only=True,
)


class DecodeCollector(EngineCollector):
    """The page of a decode engine (a KV consumer): `_DECODE_READERS` in place, plus the fetch stages."""

    def collect(self) -> Iterator[Metric]:
        for family in FAMILIES:
            if self.version != vllm.NEWEST_SUPPORTED and family.new_only:
                continue
            reader = _DECODE_READERS.get(family.name)
            if reader is not None:
                family = dataclasses.replace(family, read=reader)  # type: ignore[arg-type]
            name, help_text = (
                family.old
                if self.version != vllm.NEWEST_SUPPORTED and family.old
                else (family.name, family.help)
            )
            yield self._render(family, name, help_text)
            if family.name == "vllm:num_requests_waiting_by_reason":
                yield self._render(_KV_FETCH, _KV_FETCH.name, _KV_FETCH.help)
        yield self._cache_config_info()


#: how a decode replica's runner has a request prefilled: (its decode engine, the request)
Prefill = Callable[["PrefillingRunner", Request], None]


class RoleReplica(EmulatedReplica):
    """An emulated server of one role: its engine, page and routes are that role's."""

    def __init__(
        self,
        role: Role,
        *,
        transfer_seconds: float,
        prefill: Prefill | None,
        model: str,
        params: EngineParams,
        host: str,
        port: int,
        clock: ScaledClock,
        seed: int,
    ) -> None:
        super().__init__(model=model, params=params, host=host, port=port, clock=clock, seed=seed)
        self.role = role
        version = self.collector.version
        # The aggregated engine the base built is replaced before anything runs it.
        engine: Engine
        if role == "prefill":
            engine = PrefillEngine(params, transfer_seconds=transfer_seconds, seed=seed, start=clock.now())
            self.collector = EngineCollector(engine, model, version=version)
            self.runner = EngineRunner(engine, clock)
        else:
            if prefill is None:
                raise ValueError("a decode replica needs a prefill pool to hand requests over from")
            decode = DecodeEngine(params, transfer_seconds=transfer_seconds, seed=seed, start=clock.now())
            engine = decode
            self.collector = DecodeCollector(engine, model, version=version)
            self.runner = PrefillingRunner(decode, clock, prefill)
        self.engine = engine
        self.registry = make_registry(self.collector)
        self._app = make_app(Served(model, self.runner, self.registry, version))


class PrefillingRunner(EngineRunner):
    """A decode engine's runner: each request it submits is prefilled elsewhere first (`prefill`)."""

    def __init__(self, engine: DecodeEngine, clock: ScaledClock, prefill: Prefill) -> None:
        super().__init__(engine, clock)
        self._decode = engine
        self._prefill = prefill

    def submit(
        self, prompt: Sequence[int] | int, max_tokens: int | None = None, *, ignore_eos: bool = False
    ) -> tuple[Request, asyncio.Future[Request]]:
        request, future = super().submit(prompt, max_tokens, ignore_eos=ignore_eos)
        self._prefill(self, request)
        return request, future

    def hand_over(self, request: Request, at: float) -> None:
        """Hand `request` over to the decode engine, its prefill having ended at `at`."""
        self.catch_up()
        self._decode.hand_over(request, at)
        self.wake()


class DisaggregatedFleet:
    """P prefill and D decode replicas of one model, the decode ones prefilling on the prefill ones."""

    def __init__(
        self,
        *,
        model: str = "emulated-model",
        params: EngineParams | None = None,
        host: str = "127.0.0.1",
        base_port: int = 0,
        time_scale: float = 1.0,
        transfer_seconds: float = DEFAULT_TRANSFER_SECONDS,
        seed: int = 0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not transfer_seconds >= 0:
            raise ValueError(f"transfer_seconds {transfer_seconds!r} must be >= 0")
        self.model = model
        self.params = params or EngineParams()
        self.host = host
        self.base_port = base_port
        self.clock = ScaledClock(time_scale, monotonic=monotonic)
        self.transfer_seconds = transfer_seconds
        self.seed = seed
        self.replicas: dict[Role, list[RoleReplica]] = {"prefill": [], "decode": []}
        self._next = itertools.count()
        self._created = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()

    def _replica(self, role: Role) -> RoleReplica:
        index = next(self._created)
        return RoleReplica(
            role,
            transfer_seconds=self.transfer_seconds,
            prefill=self._prefill if role == "decode" else None,
            model=self.model,
            params=self.params,
            host=self.host,
            port=self.base_port + index if self.base_port else 0,
            clock=self.clock,
            seed=self.seed + index,
        )

    async def start(self, prefill: int, decode: int) -> None:
        """Start the replicas (prefill first); each listens at once (no load delay)."""
        if prefill < 1 or decode < 1:
            raise ValueError(f"a P/D fleet needs a replica of each role, not {prefill}:{decode}")
        counts: tuple[tuple[Role, int], ...] = (("prefill", prefill), ("decode", decode))
        for role, count in counts:
            for _ in range(count):
                replica = self._replica(role)
                await replica.start()
                self.replicas[role].append(replica)

    async def wait_ready(self) -> None:
        for replica in self.all:
            await replica.wait_ready()

    @property
    def all(self) -> list[RoleReplica]:
        return [*self.replicas["prefill"], *self.replicas["decode"]]

    def _prefill(self, decode: PrefillingRunner, request: Request) -> None:
        """Send `request`'s prefill to the next ready prefill replica; hand it over when done."""
        task = asyncio.get_running_loop().create_task(self._prefill_then_hand_over(decode, request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _prefill_then_hand_over(self, decode: PrefillingRunner, request: Request) -> None:
        ready = [r for r in self.replicas["prefill"] if r.ready]
        if not ready:
            decode.abort(request)  # no prefill pool: the sidecar answers an error, nothing decodes
            return
        prefill = ready[next(self._next) % len(ready)]
        try:
            # The prompt's length stands for its tokens: the prefill pool's prefix cache sees unique ones.
            done = await prefill.runner.complete(request.prompt_len, 1, ignore_eos=True)
        except Exception:  # rejected, or the prefill replica stopped: the request fails
            decode.abort(request)
            return
        if done.finish_reason == "abort" or done.finished is None:
            decode.abort(request)
            return
        decode.hand_over(request, done.finished)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for replica in reversed(self.all):
            await replica.stop()
        self.replicas = {"prefill": [], "decode": []}

    async def __aenter__(self) -> DisaggregatedFleet:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


def parse_pd(text: str) -> tuple[int, int]:
    """`(P, D)` from `--pd P:D`; `ValueError` naming the flag unless both are whole numbers >= 1."""
    prefill, colon, decode = text.partition(":")
    if not (colon and prefill.isdigit() and decode.isdigit() and int(prefill) >= 1 and int(decode) >= 1):
        raise ValueError(f"--pd {text!r} must be P:D, the prefill and decode replicas, each >= 1 (e.g. 2:1)")
    return int(prefill), int(decode)


async def serve(
    fleet: DisaggregatedFleet, prefill: int, decode: int, stop: asyncio.Event, say: Callable[[str], None]
) -> None:
    """Run `fleet` with `prefill`:`decode` replicas until `stop` is set (`vllm-autoscale emulate --pd`)."""
    async with fleet:
        await fleet.start(prefill, decode)
        await fleet.wait_ready()
        say(f"emulating a P/D pair of {fleet.model!r}: {prefill} prefill and {decode} decode server(s)")
        for replica in fleet.all:
            say(f"ready: {replica.url}  role={replica.role}  (/metrics /health /v1/models /v1/completions)")
        await stop.wait()
