"""The demo's clients: the profile's requests sent at their arrival times through a Service.

The Service is anything that completes a request (`Service`): the fleet itself, round-robin over
its Ready replicas as a Kubernetes Service does, or something put in front of it, such as the
upstream queue (`lab.queue.QueueService`). Latencies are the client's: TTFT runs from the moment the
client sent the request, so a wait in a queue or a retry counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Sequence
from typing import Final, Protocol

from lab.demo.cluster.deployment import GRACE_SECONDS
from lab.demo.loadgen import Arrival, Scenario, arrivals, prompt_token_ids
from lab.demo.request_log import RequestLog
from lab.demo.timeline import Timeline
from lab.emulator import AdmissionRejected, EngineStopped, NoReadyReplica, ReplicaNotReady, Request
from lab.queue import DeadLettered
from lab.records import RequestRecord

# A request refused by a replica that stopped between routing and submission is sent again, as a
# client retries a reset connection; beyond that it counts as failed.
_RETRIES: Final = 2


class Service(Protocol):
    """Where the clients send requests (`EmulatedFleet.complete`'s signature)."""

    async def complete(
        self, prompt: Sequence[int] | int, max_tokens: int | None = None, *, ignore_eos: bool = False
    ) -> Request:
        """Run one request to its end; raises `NoReadyReplica`, `ReplicaNotReady`, `EngineStopped`,
        `AdmissionRejected` or `DeadLettered` when it cannot be served."""
        ...


class Traffic:
    """Plays a profile's arrivals against `service`, writing every outcome to `log`."""

    def __init__(
        self,
        service: Service,
        timeline: Timeline,
        log: RequestLog,
        *,
        profile: Scenario,
        capacity: float,
        vocab_size: int,
        seed: int,
        poison: float = 0.0,
        poison_tokens: int = 0,
    ) -> None:
        self.service = service
        self.timeline = timeline
        self.log = log
        self.profile = profile
        self.capacity = capacity
        self.vocab_size = vocab_size
        self.seed = seed
        self.poison = poison
        """Share of requests no replica can serve (a prompt of `poison_tokens`, beyond max_model_len)."""
        self.poison_tokens = poison_tokens
        self._inflight: set[asyncio.Task[None]] = set()

    async def play(self) -> None:
        """Send the profile's requests at their arrival times; return at the profile's end."""
        for arrival in arrivals(self.profile, self.capacity, seed=self.seed):
            await self.timeline.sleep_until(arrival.at)
            task = asyncio.create_task(self.send(arrival))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)
        await self.timeline.sleep_until(self.profile.duration)

    async def drain(self) -> None:
        """Give requests still in flight a grace period to finish."""
        if self._inflight:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.timeline.clock.real(GRACE_SECONDS)):
                    await asyncio.gather(*self._inflight, return_exceptions=True)

    async def cancel(self) -> None:
        """Abort the requests still in flight (each is recorded as aborted)."""
        for task in self._inflight:
            task.cancel()
        await asyncio.gather(*self._inflight, return_exceptions=True)

    async def send(self, arrival: Arrival) -> None:
        """One request through the Service, retried when its replica stopped under it."""
        self.log.sent()
        sent = self.timeline.now()
        sent_clock = self.timeline.clock.now()
        # Only a shared prefix needs real token ids (prefix caching); a private prompt is a length.
        prompt: list[int] | int = (
            prompt_token_ids(arrival, self.vocab_size)
            if arrival.shared_prefix_tokens
            else arrival.prompt_tokens
        )
        if self.poison and random.Random(arrival.seed).random() < self.poison:
            prompt = self.poison_tokens
        request: Request | None = None
        try:
            for attempt in range(_RETRIES + 1):
                try:
                    request = await self.service.complete(prompt, arrival.max_tokens, ignore_eos=True)
                    break
                except (ReplicaNotReady, EngineStopped):
                    if attempt == _RETRIES:
                        raise
        except (NoReadyReplica, ReplicaNotReady, EngineStopped, AdmissionRejected, DeadLettered, ValueError):
            self.log.record(RequestRecord(sent, "rejected"), at=self.timeline.now())
            return
        except asyncio.CancelledError:
            self.log.record(RequestRecord(sent, "aborted"), at=self.timeline.now())
            raise
        assert request is not None
        if request.finish_reason == "abort":
            self.log.record(RequestRecord(sent, "aborted"), at=self.timeline.now())
            return
        tpot = None
        if request.num_output > 1 and request.first_token is not None and request.last_token is not None:
            tpot = (request.last_token - request.first_token) / (request.num_output - 1)
        ttft = None if request.first_token is None else request.first_token - sent_clock
        self.log.record(RequestRecord(sent, "ok", ttft, tpot), at=self.timeline.now())
