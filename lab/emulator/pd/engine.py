"""The engines of a disaggregated (P/D) pair: a prefill engine (KV producer) and a decode engine (consumer).

What vLLM does with a KV connector (NIXL, P2pNccl) between a prefill and a decode engine, in the
emulator's emulated time:

* The prefill engine runs each request's prefill (the P/D proxy sends it with `max_tokens=1`) as an
  aggregated engine would, then keeps the finished request's KV blocks for `transfer_seconds`, until
  the decode engine has read them (NIXL frees them when the consumer says so).
* The decode engine takes the request after its prefill (`hand_over`): the request waits for KV blocks
  (`stage="waiting_to_start"`), fetches the prompt's KV for `transfer_seconds` (`in_progress`), then
  waits for a batch slot like any request (`completed_waiting`) and decodes without recomputing its
  prompt (all but its last token arrived: `prompt_tokens_by_source{source="external_kv_transfer"}`).
  Requests still fetching are vLLM's *deferred* waiting requests.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lab.emulator.engine import Engine
from lab.emulator.params import EngineParams
from lab.emulator.request import Request, RequestStatus
from lab.emulator.stats import EngineStats


class PrefillEngine(Engine):
    """An engine whose finished requests hold their KV blocks `transfer_seconds` longer (the hand-over)."""

    def __init__(
        self, params: EngineParams, *, transfer_seconds: float, seed: int = 0, start: float = 0.0
    ) -> None:
        super().__init__(params, seed=seed, start=start)
        self.transfer_seconds = transfer_seconds
        self._held: list[tuple[float, int, list[int]]] = []  # (released at, order, blocks)
        self._handovers = 0

    @property
    def idle(self) -> bool:
        return super().idle and not self._held

    def run_until(self, until: float, max_steps: int | None = None) -> None:
        self._release(self.now)
        if (
            self._held
            and self._held[0][0] < until
            and not (self.running or self.waiting or self.num_frontend)
        ):
            # Nothing else to do: jump to the release (the base engine would jump to `until`).
            super().run_until(self._held[0][0], max_steps)
            self._release(self.now)
        super().run_until(until, max_steps)
        self._release(self.now)

    def next_event(self) -> float | None:
        """As the base engine's, or the next release of held blocks if that comes first."""
        due = super().next_event()
        if self._held and (due is None or self._held[0][0] < due):
            return self._held[0][0]
        return due

    def _release(self, now: float) -> None:
        while self._held and self._held[0][0] <= now:
            self.kv.free(heapq.heappop(self._held)[2])

    def _finish(self, request: Request, reason: str) -> None:
        if reason != "abort" and request.blocks:
            held = list(request.blocks)
            request.blocks.clear()
            # Ties at one release instant go in finishing order (a counter, not `id`, which follows
            # the memory layout and made runs of one seed differ).
            self._handovers += 1
            heapq.heappush(self._held, (self.now + self.transfer_seconds, self._handovers, held))
        super()._finish(request, reason)


class HandOverStats(EngineStats):
    """Prompt tokens split as a consumer counts them: those whose KV arrived are `external_kv_transfer`."""

    def __init__(self, max_model_len: int, arrived: dict[int, int]) -> None:
        super().__init__(max_model_len)
        self._arrived = arrived
        self.prompt_tokens_external = 0
        self.external_prefix_cache_queries = 0
        self.external_prefix_cache_hits = 0

    def record_first_token(self, request: Request) -> None:
        super().record_first_token(request)
        external = self._arrived.pop(id(request), 0)
        # The engine counted them as cached (they were not computed here); they are the connector's.
        self.prompt_tokens_local_cache_hit -= external
        self.prompt_tokens_external += external


@dataclass(eq=False)
class Fetch:
    """One request on its way into the decode engine."""

    request: Request
    since: float
    """When it reached the decode engine (the hand-over)."""
    done: float | None = None
    """When its KV has arrived; `None` while waiting for blocks to fetch into."""


class DecodeEngine(Engine):
    """An engine whose requests arrive prefilled elsewhere: `hand_over` them after their prefill."""

    def __init__(
        self, params: EngineParams, *, transfer_seconds: float, seed: int = 0, start: float = 0.0
    ) -> None:
        super().__init__(params, seed=seed, start=start)
        self.transfer_seconds = transfer_seconds
        self._arrived: dict[int, int] = {}
        self.handover = HandOverStats(params.max_model_len, self._arrived)
        self.stats = self.handover
        self._prefilling: set[int] = set()
        self.fetching: list[Fetch] = []
        """Requests handed over whose KV has not arrived (vLLM's WAITING_FOR_REMOTE_KVS)."""

    @property
    def idle(self) -> bool:
        return super().idle and not self.fetching and not self._prefilling

    def stages(self) -> dict[str, int]:
        """Requests per `vllm:num_requests_kv_fetch_by_stage` stage."""
        started = sum(1 for fetch in self.fetching if fetch.done is not None)
        arrived = sum(1 for request in self.waiting if id(request) in self._arrived)
        return {
            "waiting_to_start": len(self.fetching) - started,
            "in_progress": started,
            "completed_waiting": arrived,
        }

    def hand_over(self, request: Request, at: float) -> None:
        """Take a request (from `submit`, held back) whose prefill ended at `at` on a prefill engine.

        As on a decode vLLM it arrives now: its TTFT, queue and e2e times start here."""
        self._prefilling.discard(id(request))
        request.arrival = request.enqueued = max(at, self.now)
        self.handover.external_prefix_cache_queries += request.prompt_len
        self.fetching.append(Fetch(request, request.arrival))
        self._start_fetches()

    def submit(
        self,
        prompt: Sequence[int] | int,
        max_tokens: int | None = None,
        *,
        ignore_eos: bool = False,
        at: float | None = None,
        on_finish: Callable[[Request], None] | None = None,
        request_id: str | None = None,
    ) -> Request:
        """As `Engine.submit`, but the request waits outside the engine (its prefill runs on a prefill
        engine) until `hand_over`; meanwhile the engine is not idle, so its runner keeps stepping."""
        request = super().submit(
            prompt, max_tokens, ignore_eos=ignore_eos, at=at, on_finish=on_finish, request_id=request_id
        )
        self._frontend = [entry for entry in self._frontend if entry[2] is not request]
        heapq.heapify(self._frontend)
        self._prefilling.add(id(request))
        return request

    def abort(self, request: Request) -> None:
        self.fetching = [fetch for fetch in self.fetching if fetch.request is not request]
        self._prefilling.discard(id(request))
        self._arrived.pop(id(request), None)
        super().abort(request)

    def run_until(self, until: float, max_steps: int | None = None) -> None:
        while True:
            self._start_fetches()
            self._land(self.now)
            due = min((f.done for f in self.fetching if f.done is not None), default=None)
            if due is None or due >= until:
                super().run_until(until, max_steps)
                self._start_fetches()
                self._land(self.now)
                return
            super().run_until(max(due, self.now), max_steps)
            if max_steps is not None and self.now < due:
                return  # the caller's step budget is spent

    def next_event(self) -> float | None:
        """As the base engine's, or the next landing of a fetched prompt's KV if that comes first."""
        due = super().next_event()
        landing = min((f.done for f in self.fetching if f.done is not None), default=None)
        if landing is not None and (due is None or landing < due):
            return landing
        return due

    def _start_fetches(self) -> None:
        """Give waiting hand-overs, in order, the blocks their prompt's KV lands in.

        vLLM allocates a hand-over's blocks when its waiting loop reaches it (`Scheduler.schedule`). That
        loop does not run in a step that preempted and stops at a request it cannot admit: no fetch while
        a preempted request waits (at the queue's head); taking the blocks a preemption freed starved it
        until nothing ran. It also stops once the batch is full (`len(running) == max_num_seqs`), after
        admitting the requests ahead (the waiting ones here, landed or preempted; those still fetching
        are not running and take no slot): no fetch while they fill the batch. Fetching then, requests
        waiting for a slot held KV, filled the pool and made the running preempt each other."""
        if self.waiting and self.waiting[0].num_preemptions:
            return
        if len(self.running) + len(self.waiting) >= self.params.max_num_seqs:
            return
        for fetch in self.fetching:
            if fetch.done is not None:
                continue
            request = fetch.request
            if not self.kv.allocate(request.blocks, (), request.prompt_len):
                return  # the head waits for blocks; later ones wait behind it, as vLLM's queue does
            fetch.done = max(self.now, fetch.since) + self.transfer_seconds

    def _land(self, now: float) -> None:
        """Requests whose KV arrived join the waiting queue with all but their last prompt token present."""
        landed = [fetch for fetch in self.fetching if fetch.done is not None and fetch.done <= now]
        for fetch in landed:
            self.fetching.remove(fetch)
            request = fetch.request
            arrived = request.prompt_len - 1  # vLLM recomputes the last prompt token for its logits
            self._arrived[id(request)] = arrived
            self.handover.external_prefix_cache_hits += arrived
            request.status = RequestStatus.WAITING
            self.waiting.append(request)

    def _arrived_tokens(self, request: Request) -> int:
        # Only while its fetched blocks are still its own: a preempted request recomputes its prompt.
        return self._arrived.get(id(request), 0) if request.blocks else 0

    def _preempt(self, request: Request) -> None:
        super()._preempt(request)
        self._arrived.pop(id(request), None)
