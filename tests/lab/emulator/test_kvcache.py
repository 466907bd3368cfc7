"""The KV block pool: allocation, usage, prefix-cache lookups and eviction order."""

from __future__ import annotations

import pytest

from lab.emulator.kvcache import KVCache
from lab.emulator.request import block_hashes


def test_a_request_holds_ceil_tokens_over_block_size_blocks() -> None:
    """Allocation grows a block table to ceil(tokens / block_size) and usage counts held blocks."""
    kv = KVCache(10, 4)
    blocks: list[int] = []
    assert kv.allocate(blocks, (), 5)
    assert len(blocks) == 2
    assert kv.allocate(blocks, (), 8)
    assert len(blocks) == 2
    assert kv.allocate(blocks, (), 9)
    assert len(blocks) == 3
    assert kv.usage == pytest.approx(0.3)
    kv.free(blocks)
    assert blocks == []
    assert kv.usage == 0.0


def test_allocation_that_does_not_fit_changes_nothing() -> None:
    """When the free blocks do not suffice, allocate returns False and the pool is untouched."""
    kv = KVCache(4, 4)
    held: list[int] = []
    assert kv.allocate(held, (), 12)
    other: list[int] = []
    assert not kv.allocate(other, (), 8)
    assert other == []
    assert kv.num_free == 1


def test_identical_prefix_hits_cached_blocks_but_recomputes_the_last_token() -> None:
    """A freed request's full prompt blocks are found by an identical prompt, minus the last block."""
    kv = KVCache(16, 4)
    prompt = list(range(12))
    hashes = block_hashes(prompt, 4)
    first: list[int] = []
    assert kv.allocate(first, (), 12)
    kv.cache_blocks(first, hashes, 0, 3)
    kv.free(first)
    hits = kv.lookup(hashes, 12)
    assert len(hits) == 2, "12 tokens in 3 full blocks: the block holding the last token is recomputed"
    longer = block_hashes([*prompt, 99, 98, 97, 96], 4)
    assert len(kv.lookup(longer, 16)) == 3


def test_different_prefix_misses_even_with_an_equal_later_block() -> None:
    """Hashes chain over the whole prefix: a block equal to a cached one after a difference misses."""
    kv = KVCache(16, 4)
    cached = block_hashes([1, 2, 3, 4, 5, 6, 7, 8], 4)
    blocks: list[int] = []
    assert kv.allocate(blocks, (), 8)
    kv.cache_blocks(blocks, cached, 0, 2)
    other = block_hashes([0, 0, 0, 0, 5, 6, 7, 8, 9], 4)
    assert kv.lookup(other, 9) == []


def test_free_blocks_are_evicted_tail_first_and_least_recently_freed_first() -> None:
    """The shared head of a prompt survives longest: tails of freed requests are evicted first."""
    kv = KVCache(4, 2)
    hashes = block_hashes([1, 2, 3, 4, 5, 6, 7, 8], 2)
    blocks: list[int] = []
    assert kv.allocate(blocks, (), 8)
    kv.cache_blocks(blocks, hashes, 0, 4)
    kv.free(blocks)
    assert len(kv.lookup(hashes, 9)) == 4
    newcomer: list[int] = []
    assert kv.allocate(newcomer, (), 2)
    assert len(kv.lookup(hashes, 9)) == 3, "the tail block went first; the first three still hit"
    assert kv.eviction_rank(kv.lookup(hashes, 9)) == 0, "the third block is next in the free queue"
    assert kv.eviction_rank(kv.lookup(hashes, 9)[:1]) == 2, "the head goes after blocks 3 and 2"
    assert kv.eviction_rank([]) == kv.num_free


def test_hits_on_blocks_others_hold_are_shared_not_counted_as_free() -> None:
    """A cached block in use by another request is shared (ref-counted); it costs no free block."""
    kv = KVCache(3, 2)
    hashes = block_hashes([1, 2, 3, 4], 2)
    owner: list[int] = []
    assert kv.allocate(owner, (), 4)
    kv.cache_blocks(owner, hashes, 0, 2)
    hits = kv.lookup(hashes, 5)
    sharer: list[int] = []
    assert kv.allocate(sharer, hits, 5)
    assert sharer[:2] == owner
    assert kv.num_free == 0
    kv.free(owner)
    assert kv.num_free == 0, "still held by the sharer"
    kv.free(sharer)
    assert kv.num_free == 3


def test_prefix_caching_off_never_hits() -> None:
    """With prefix caching disabled lookups are empty and nothing is published."""
    kv = KVCache(8, 2, enable_prefix_caching=False)
    hashes = block_hashes([1, 2, 3, 4], 2)
    blocks: list[int] = []
    assert kv.allocate(blocks, (), 4)
    kv.cache_blocks(blocks, hashes, 0, 2)
    kv.free(blocks)
    assert kv.lookup(hashes, 5) == []
