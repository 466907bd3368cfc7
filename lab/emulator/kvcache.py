"""The KV-cache block pool with prefix caching, after vLLM V1's `BlockPool`/`KVCacheManager`.

A request holds `ceil(tokens / block_size)` blocks. Freed blocks keep their prefix hash and stay
reusable until the pool needs them: the free queue is least-recently-freed first, and a request's
blocks are freed tail first, so the shared head of a prompt is evicted last. Usage counts only
blocks some request holds, as `vllm:kv_cache_usage_perc` does (cached free blocks are free).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class KVCache:
    """A pool of `num_blocks` blocks of `block_size` tokens."""

    def __init__(self, num_blocks: int, block_size: int, *, enable_prefix_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self._refs = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        # Insertion order is eviction order: the front is the least recently freed block.
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self._cached: dict[int, int] = {}

    @property
    def num_free(self) -> int:
        """Blocks no request holds (cached or not)."""
        return len(self._free)

    @property
    def usage(self) -> float:
        """Fraction of blocks held by requests, 0 to 1."""
        return 1.0 - len(self._free) / self.num_blocks

    def blocks_for(self, num_tokens: int) -> int:
        """Blocks needed to hold `num_tokens` tokens."""
        return -(-num_tokens // self.block_size)

    def lookup(self, hashes: Sequence[int], num_tokens: int) -> list[int]:
        """Cached blocks for the longest cached prefix of `hashes`.

        At least the last token is always recomputed (its logits are needed), so a fully cached
        prompt hits one block less, as in vLLM.
        """
        if not self.enable_prefix_caching:
            return []
        hits: list[int] = []
        for block_hash in hashes[: (num_tokens - 1) // self.block_size]:
            block = self._cached.get(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits

    def allocate(self, blocks: list[int], hits: Sequence[int], num_tokens: int) -> bool:
        """Grow a request's block table to hold `num_tokens`, taking the cached `hits` first.

        Returns False and changes nothing when the free blocks do not suffice; a hit block that
        nobody holds counts against the free blocks, since taking it removes it from the queue.
        """
        new = -(-num_tokens // self.block_size) - len(blocks) - len(hits)
        free, refs = self._free, self._refs
        # Locals, and no pass over `hits` when there are none: decode growth (one block, no hits)
        # is the engine's most frequent call.
        if hits:
            if new + sum(1 for block in hits if refs[block] == 0) > len(free):
                return False
            for block in hits:
                if refs[block] == 0:
                    del free[block]
                refs[block] += 1
                blocks.append(block)
        elif new > len(free):
            return False
        if new > 0:
            hashes, cached, take = self._hash, self._cached, free.popitem
            for _ in range(new):
                block = take(last=False)[0]
                evicted = hashes[block]
                if evicted is not None:
                    hashes[block] = None
                    if cached.get(evicted) == block:
                        del cached[evicted]
                refs[block] = 1
                blocks.append(block)
        return True

    def eviction_rank(self, blocks: Sequence[int]) -> int:
        """How many blocks can be allocated before one of `blocks` is evicted (all free ones if never)."""
        candidates = {block for block in blocks if self._refs[block] == 0}
        if candidates:
            for rank, block in enumerate(self._free):
                if block in candidates:
                    return rank
        return len(self._free)

    def cache_blocks(self, blocks: Sequence[int], hashes: Sequence[int], start: int, end: int) -> None:
        """Publish blocks `start:end` (now fully computed) under their prefix hashes."""
        if not self.enable_prefix_caching:
            return
        hashes_of, cached = self._hash, self._cached
        for index in range(start, end):
            block, block_hash = blocks[index], hashes[index]
            if hashes_of[block] is None and block_hash not in cached:
                hashes_of[block] = block_hash
                cached[block_hash] = block

    def free(self, blocks: list[int]) -> None:
        """Release a request's blocks, tail first, and empty its table."""
        refs, free = self._refs, self._free
        for block in reversed(blocks):
            refs[block] -= 1
            if refs[block] == 0:
                free[block] = None
        blocks.clear()
