"""The continuous-batching engine, stepped in emulated time.

Each `step` does what one iteration of vLLM's V1 scheduler and model runner does: schedule the
running requests first (one decode token each, or the next prefill chunk), growing their KV blocks
and preempting the newest running request when blocks run out; then, unless something was
preempted, admit waiting requests in arrival order while a slot, the token budget and KV blocks
allow (the head of the queue blocks the rest). The step takes `EngineParams.step_seconds` of
emulated time, after which every request whose KV caught up samples one token.

Preemption is vLLM V1's recompute (`Scheduler._preempt_request`): the victim frees its blocks (tail
first, so its head is evicted last), goes back to the *front* of the waiting queue, and is admitted
again, before any new request, once the pool holds all of its prompt and generated tokens. Every full
block a request computed, generated tokens included, is in the prefix cache (vLLM hashes them all),
so it then recomputes only the blocks that others took from the free queue meanwhile, not its whole
history. Its lookups count under vLLM's preempted counters, not `prefix_cache_queries`/`_hits`.

The engine never reads a clock: `run_until(t)` advances it, so tests run hours in seconds and
`runner.EngineRunner` ties it to (scaled) real time. Runs of pure-decode steps in which nothing can
change (no arrival, no finish, enough free blocks) are applied in one go; `fast_forward=False`
turns that off and gives the same result step by step (exactly so with `step_jitter=0`).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable, Sequence

from lab.emulator.decode_runs import DecodeRuns
from lab.emulator.kvcache import KVCache
from lab.emulator.params import EngineParams
from lab.emulator.request import (
    Request,
    RequestStatus,
    block_hashes,
    draw_stop,
    extend_hashes,
    output_budget,
    unique_hashes,
)
from lab.emulator.stats import EngineStats


class AdmissionRejected(Exception):
    """The waiting queue is at `max_num_queued_reqs`: vLLM answers 503 and counts a rejection."""


class Engine(DecodeRuns):
    """One emulated vLLM engine core (one `engine` label value)."""

    def __init__(
        self, params: EngineParams, *, seed: int = 0, start: float = 0.0, fast_forward: bool = True
    ) -> None:
        self.params = params
        self.now = start
        self.fast_forward = fast_forward
        self.stats = EngineStats(params.max_model_len)
        self.kv = KVCache(
            params.num_gpu_blocks, params.block_size, enable_prefix_caching=params.enable_prefix_caching
        )
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.steps = 0
        self._rng = random.Random(seed)
        self._frontend: list[tuple[float, int, Request]] = []
        self._sequence = itertools.count()
        # (queried tokens, hit blocks) of the queue head that could not be admitted in the last step;
        # vLLM looks it up again on every step, which is why prefix-cache queries inflate under pressure
        # (tokens 0 for a preempted head: vLLM counts its lookups apart).
        self._blocked_lookup: tuple[int, list[int]] | None = None
        # (now, steps, batch size, fewest tokens any running request has left, the run's step jitter)
        # of a decode run planned or applied: while the first three hold (only a step, counted in
        # `steps`, adds to the batch) all still decode, and the run goes on at that step time.
        self._decoding: tuple[float, int, int, int, float] | None = None
        # Set by a live runner, which sleeps until `next_event`: a decode run's jitter is drawn when the
        # run is planned and kept while it goes on, so its end is known ahead and a run cut short (a
        # read, an abort) goes on at the same step time (a last single step is a step of its own, with
        # its own jitter, as in any run). Off (engines driven by `run_until` directly:
        # the demo's capacity, the twin), each applied run draws its own, as before.
        self.planned_runs = False

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
        """Accept a request that arrived at the front-end at `at` (default: now).

        `prompt` is token ids, or a length for a prompt of unique tokens (no prefix-cache hits).
        Raises `ValueError` for a request vLLM would answer 400, `AdmissionRejected` for a 503.
        """
        params = self.params
        prompt_len = prompt if isinstance(prompt, int) else len(prompt)
        budget = output_budget(prompt_len, max_tokens, params.max_model_len)
        limit = params.max_num_queued_reqs
        if limit is not None and len(self.waiting) + len(self._frontend) >= limit:
            self.stats.admission_rejections["max_num_queued_reqs"] += 1
            raise AdmissionRejected(f"waiting queue is full ({limit} requests)")
        stop_len, reason = draw_stop(budget, 0.0 if ignore_eos else params.eos_probability, self._rng)
        arrival = self.now if at is None else at
        sequence = next(self._sequence)
        request = Request(
            request_id=request_id or f"cmpl-{sequence}",
            prompt_len=prompt_len,
            max_tokens=budget,
            max_tokens_param=max_tokens,
            stop_len=stop_len,
            stop_reason=reason,
            block_hashes=(
                unique_hashes(sequence, prompt_len // params.block_size)
                if isinstance(prompt, int)
                else block_hashes(prompt, params.block_size)
            ),
            arrival=arrival,
            enqueued=arrival + params.frontend_seconds,
            key=sequence,
            on_finish=on_finish,
        )
        heapq.heappush(self._frontend, (request.enqueued, sequence, request))
        return request

    def abort(self, request: Request) -> None:
        """Drop a request wherever it is (client gone, server stopping); counted as `abort`."""
        if request.status is RequestStatus.FINISHED:
            return
        if request.status is RequestStatus.FRONTEND:
            self._frontend = [entry for entry in self._frontend if entry[2] is not request]
            heapq.heapify(self._frontend)
        elif request.status is RequestStatus.WAITING:
            self.waiting.remove(request)
        else:
            self.running.remove(request)
        self._finish(request, "abort")

    @property
    def num_frontend(self) -> int:
        """Requests accepted but not yet in the engine's queue."""
        return len(self._frontend)

    @property
    def idle(self) -> bool:
        """Nothing to do until a new request arrives."""
        return not (self.running or self.waiting or self._frontend)

    def run_until(self, until: float, max_steps: int | None = None) -> None:
        """Run every step that starts before `until` (the last may end after it), or `max_steps`."""
        budget = max_steps if max_steps is not None else -1
        while budget != 0:
            frontend = self._frontend
            while frontend and frontend[0][0] <= self.now:
                request = heapq.heappop(frontend)[2]
                request.status = RequestStatus.WAITING
                self.waiting.append(request)
            if not self.running and not self.waiting:
                if not frontend or frontend[0][0] >= until:
                    self.now = max(self.now, until)
                    return
                self.now = frontend[0][0]
                continue
            if self.now >= until:
                return
            if not (self.fast_forward and self._fast_forward(until)):
                self.step()
            budget -= 1

    def step(self) -> None:
        """One engine iteration: schedule, spend the step's time, emit tokens, finish requests."""
        params, kv, stats, running = self.params, self.kv, self.stats, self.running
        started, block_size = self.now, kv.block_size
        budget = params.max_num_batched_tokens
        scheduled: list[tuple[Request, int]] = []
        preempted = False
        index = 0
        while index < len(running) and budget > 0:
            request = running[index]
            computed = request.num_computed
            tokens = min(request.prompt_len + request.num_output - computed, budget)
            grows = computed + tokens > len(request.blocks) * block_size  # kv.blocks_for(...) > len
            while grows and not kv.allocate(request.blocks, (), request.num_computed + tokens):
                victim = running.pop()
                self._preempt(victim)
                preempted = True
                if victim is request:
                    break
            else:
                scheduled.append((request, tokens))
                budget -= tokens
                index += 1
                continue
            break
        self._blocked_lookup = None
        while not preempted and self.waiting and budget > 0 and len(running) < params.max_num_seqs:
            request = self.waiting[0]
            # KV a P/D hand-over put in the request's blocks already (`disaggregated`); 0 here.
            arrived = self._arrived_tokens(request)
            hits = [] if arrived else kv.lookup(request.block_hashes, request.num_tokens)
            hit_tokens = len(hits) * params.block_size
            queried = 0 if request.num_preemptions else request.num_tokens
            stats.prefix_cache_queries += queried
            stats.prefix_cache_hits += hit_tokens if queried else 0
            tokens = min(request.num_tokens - hit_tokens - arrived, budget)
            if not kv.allocate(request.blocks, hits, hit_tokens + arrived + tokens):
                self._blocked_lookup = (queried, hits)
                break
            self.waiting.popleft()
            running.append(request)
            request.status = RequestStatus.RUNNING
            request.num_computed = hit_tokens + arrived
            request.num_cached_blocks = len(hits)
            if request.first_scheduled is None:
                request.first_scheduled = started
                request.num_cached_prompt_tokens = hit_tokens + arrived
            scheduled.append((request, tokens))
            budget -= tokens

        num_tokens = params.max_num_batched_tokens - budget
        duration = params.step_seconds(len(scheduled), num_tokens) * self._jitter()
        self.now = ended = started + duration
        self.steps += 1
        stats.iteration_tokens.observe(num_tokens)
        decoded = generated = 0
        finished: list[Request] = []
        caching = params.enable_prefix_caching
        for request, tokens in scheduled:
            request.num_computed += tokens
            if caching and request.num_computed // block_size > request.num_cached_blocks:
                self._cache_full_blocks(request)
            if request.num_computed < request.prompt_len + request.num_output:
                continue
            request.num_output += 1
            generated += 1
            if request.first_token is None:
                request.first_token = ended
                stats.record_first_token(request)
            elif request.last_token == started:
                decoded += 1
            else:
                assert request.last_token is not None
                stats.inter_token_latency.observe(ended - request.last_token)
            request.last_token = ended
            if request.num_output >= request.stop_len:
                finished.append(request)
        stats.inter_token_latency.observe(duration, decoded)
        stats.generation_tokens += generated
        if finished:
            # Their blocks and slots are free now: the head's failed lookup says nothing any more.
            self._blocked_lookup = None
        for request in finished:
            running.remove(request)
            self._finish(request, request.stop_reason)

    def _cache_full_blocks(self, request: Request) -> None:
        """Publish the blocks the request's computed tokens filled, generated ones included."""
        if not self.params.enable_prefix_caching:
            return
        full = request.num_computed // self.params.block_size
        if full > request.num_cached_blocks:
            extend_hashes(request.block_hashes, request.key, full)
            self.kv.cache_blocks(request.blocks, request.block_hashes, request.num_cached_blocks, full)
            request.num_cached_blocks = full

    def _arrived_tokens(self, request: Request) -> int:
        """Prompt tokens whose KV a request brought with it (a decode engine's hand-over); none here."""
        return 0

    def _jitter(self) -> float:
        spread = self.params.step_jitter
        return 1.0 + spread * (2.0 * self._rng.random() - 1.0) if spread else 1.0

    def _preempt(self, request: Request) -> None:
        self.kv.free(request.blocks)
        request.num_computed = 0
        request.num_cached_blocks = 0
        request.num_preemptions += 1
        request.status = RequestStatus.WAITING
        self.stats.num_preemptions += 1
        self.waiting.appendleft(request)

    def _finish(self, request: Request, reason: str) -> None:
        self.kv.free(request.blocks)
        request.status = RequestStatus.FINISHED
        request.finish_reason = reason
        request.finished = self.now
        self.stats.record_finished(request)
        if request.on_finish is not None:
            request.on_finish(request)
