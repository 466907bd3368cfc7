"""Runs of identical pure-decode steps, planned ahead and applied at once: the engine's fast path.

While every running request decodes (one token behind, sampled in the last step), nothing arrives,
none finishes and the pool has blocks for their growth, each step is the same as the last: the engine
applies such a run in one go (`Engine.run_until`) and a live runner sleeps to its end (`next_event`).
Kept apart from `engine` because it is an optimisation of it: `Engine(fast_forward=False)` steps
through the same run one step at a time with the same result (exactly so with `step_jitter=0`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque

from lab.emulator.kvcache import KVCache
from lab.emulator.params import EngineParams
from lab.emulator.request import Request
from lab.emulator.stats import EngineStats


class DecodeRuns:
    """Mixed into `Engine`, whose state it reads and advances."""

    params: EngineParams
    kv: KVCache
    stats: EngineStats
    now: float
    steps: int
    fast_forward: bool
    planned_runs: bool
    waiting: deque[Request]
    running: list[Request]
    _frontend: list[tuple[float, int, Request]]
    _blocked_lookup: tuple[int, list[int]] | None
    _decoding: tuple[float, int, int, int, float] | None

    def _jitter(self) -> float:
        raise NotImplementedError

    def _cache_full_blocks(self, request: Request) -> None:
        raise NotImplementedError

    def next_event(self) -> float | None:
        """When the engine must next be run, if nothing arrives: the start of its next step, past a run of
        decode steps in which no request changes state; the next arrival when nothing runs; `None` when
        only a new request (or a hand-over) can give it work. Exact with `planned_runs`."""
        if self.running or self.waiting:
            run = self._decode_run(None) if self.fast_forward else None
            return self.now if run is None else self.now + run[0] * run[1]
        return self._frontend[0][0] if self._frontend else None

    def _decode_run(self, until: float | None) -> tuple[int, float] | None:
        """(steps, duration of each) of the run of identical pure-decode steps that can be applied at
        once from now, the last starting before `until`; `None` when fewer than two can. The duration
        is without its jitter unless `planned_runs` (then it is drawn here, see `__init__`)."""
        running, params = self.running, self.params
        # Nothing running: no decode to skip (a P/D prefill engine's head can wait on blocks it holds
        # for a hand-over with its batch empty).
        if not running or (
            self.waiting and len(running) < params.max_num_seqs and self._blocked_lookup is None
        ):
            return None
        now = self.now
        known = self._decoding
        if known is not None and known[:3] == (now, self.steps, len(running)):
            fewest, jitter = known[3], known[4]
        else:
            for request in running:  # each decodes (one token behind) and sampled in the last step
                computed = request.num_computed
                if computed != request.prompt_len + request.num_output - 1 or request.last_token != now:
                    return None
            fewest = min([request.stop_len - request.num_output for request in running])
            jitter = self._jitter() if self.planned_runs else 1.0
            self._decoding = (now, self.steps, len(running), fewest, jitter)
        duration = params.step_seconds(len(running), len(running)) * jitter
        steps = fewest - 1
        if until is not None:
            steps = min(steps, math.ceil((until - now) / duration))
        if self._frontend:
            steps = min(steps, math.ceil((self._frontend[0][0] - now) / duration))
        if steps < 2:  # the block limit below can only lower it
            return None
        # Stop before the growth evicts a cached block the blocked head would hit, so the head's
        # repeated lookups hit the same blocks on every skipped step.
        kv, block_size = self.kv, self.kv.block_size
        limit = kv.num_free
        if self._blocked_lookup is not None:
            limit = min(limit, kv.eviction_rank(self._blocked_lookup[1]))
        # Blocks always hold their request's computed tokens, so each takes at most ceil(steps /
        # block_size) more: when the pool has that for all (nearly always), no need to count.
        if len(running) * -(-steps // block_size) > limit:
            steps = self._affordable_steps(steps, limit)
            if steps < 2:
                return None
        return steps, duration

    def _fast_forward(self, until: float) -> bool:
        """Apply a run of identical pure-decode steps at once; False when none can be skipped."""
        run = self._decode_run(until)
        if run is None:
            return False
        steps, duration = run
        if not self.planned_runs:
            duration *= self._jitter()
        running, params, now = self.running, self.params, self.now
        kv, block_size = self.kv, self.kv.block_size
        ended = now + steps * duration
        caching = params.enable_prefix_caching
        for request in running:
            computed = request.num_computed + steps
            if computed > len(request.blocks) * block_size:  # kv.blocks_for(computed) > len(blocks)
                kv.allocate(request.blocks, (), computed)
            request.num_computed = computed
            request.num_output += steps
            request.last_token = ended
            if caching and computed // block_size > request.num_cached_blocks:
                self._cache_full_blocks(request)
        count = steps * len(running)
        self.stats.generation_tokens += count
        self.stats.inter_token_latency.observe(duration, count)
        self.stats.iteration_tokens.observe(len(running), steps)
        if self._blocked_lookup is not None and self._blocked_lookup[0]:
            self.stats.prefix_cache_queries += steps * self._blocked_lookup[0]
            self.stats.prefix_cache_hits += steps * len(self._blocked_lookup[1]) * self.params.block_size
        self.now = ended
        self.steps += steps
        known = self._decoding
        assert known is not None
        self._decoding = (ended, self.steps, len(running), known[3] - steps, known[4])
        return True

    def _affordable_steps(self, steps: int, free: int) -> int:
        """The most decode steps (up to `steps`) whose block growth takes at most `free` blocks."""
        size = self.kv.block_size
        # Token slots a request's blocks have beyond its computed tokens (`room`): k more steps take
        # ceil((k - room) / size) new blocks, i.e. `blocks_for(num_tokens + k - 1) - len(blocks)`.
        slack = [len(request.blocks) * size - request.num_computed for request in self.running]
        return bisect_right(range(steps + 1), free, key=lambda k: -sum([(r - k) // size for r in slack])) - 1
