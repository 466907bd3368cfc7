"""A set of emulated replicas of one model that can grow and shrink at runtime (a Deployment).

Replicas share one `ScaledClock`. With `base_port` P, the i-th replica ever created listens on
P + i (ports are not reused after a scale-down, as pod IPs are not); with P = 0 each takes a free
port. `complete` spreads direct requests round-robin over Ready replicas, as a Service does.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

from lab.clock import ScaledClock
from lab.emulator.params import EngineParams
from lab.emulator.replica import EmulatedReplica
from lab.emulator.request import Request
from lab.engine.readiness import NoReadyReplica


class EmulatedFleet:
    """Emulated vLLM replicas serving `model`; see the package docstring for the API."""

    def __init__(
        self,
        *,
        model: str = "emulated-model",
        params: EngineParams | None = None,
        host: str = "127.0.0.1",
        base_port: int = 0,
        vllm_version: str = "0.33",
        load_delay: float = 0.0,
        time_scale: float = 1.0,
        seed: int = 0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.params = params or EngineParams()
        self.host = host
        self.base_port = base_port
        self.vllm_version = vllm_version
        self.load_delay = load_delay
        self.clock = ScaledClock(time_scale, monotonic=monotonic)
        self.seed = seed
        self.replicas: list[EmulatedReplica] = []
        self._created = itertools.count()
        self._next = 0

    @property
    def ready_replicas(self) -> list[EmulatedReplica]:
        """Replicas that listen and take requests."""
        return [replica for replica in self.replicas if replica.ready]

    @property
    def urls(self) -> list[str]:
        return [replica.url for replica in self.replicas]

    @property
    def metrics_urls(self) -> list[str]:
        return [replica.metrics_url for replica in self.replicas]

    async def start(self, replicas: int = 1) -> None:
        """Start `replicas` replicas (each with the fleet's load delay)."""
        await self.scale_to(replicas)

    async def add_replica(self, load_delay: float | None = None) -> EmulatedReplica:
        """Start one more replica; it becomes Ready after `load_delay` (default: the fleet's)."""
        index = next(self._created)
        replica = EmulatedReplica(
            model=self.model,
            params=self.params,
            host=self.host,
            port=self.base_port + index if self.base_port else 0,
            vllm_version=self.vllm_version,
            load_delay=self.load_delay if load_delay is None else load_delay,
            clock=self.clock,
            seed=self.seed + index,
        )
        await replica.start()
        self.replicas.append(replica)
        return replica

    async def remove_replica(
        self, replica: EmulatedReplica | None = None, *, drain_timeout: float = 0.0
    ) -> None:
        """Stop one replica: the given one, else one not Ready, else the newest (a ReplicaSet's choice)."""
        if replica is None:
            if not self.replicas:
                return
            loading = [r for r in self.replicas if not r.ready]
            replica = loading[-1] if loading else self.replicas[-1]
        self.replicas.remove(replica)
        await replica.stop(drain_timeout)

    async def scale_to(self, replicas: int, *, drain_timeout: float = 0.0) -> None:
        """Add or remove replicas until there are `replicas`."""
        if replicas < 0:
            raise ValueError(f"replicas {replicas!r} must be >= 0")
        while len(self.replicas) < replicas:
            await self.add_replica()
        while len(self.replicas) > replicas:
            await self.remove_replica(drain_timeout=drain_timeout)

    async def complete(
        self, prompt: Sequence[int] | int, max_tokens: int | None = None, *, ignore_eos: bool = False
    ) -> Request:
        """Send one request to the next Ready replica (round-robin) and return it finished."""
        ready = self.ready_replicas
        if not ready:
            raise NoReadyReplica(f"no ready replica of {self.model!r} ({len(self.replicas)} loading)")
        replica = ready[self._next % len(ready)]
        self._next += 1
        return await replica.complete(prompt, max_tokens, ignore_eos=ignore_eos)

    async def stop(self) -> None:
        """Stop every replica."""
        while self.replicas:
            await self.remove_replica(self.replicas[-1])

    async def __aenter__(self) -> EmulatedFleet:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
