"""GPUs and ports for engines side by side: one engine per GPU, each on its own port."""

from __future__ import annotations

import asyncio

import pytest

from lab.engine.placement import PlacementPool, host_gpus, placements
from lab.engine.process import EngineFailure, Placement


def test_gpus_given_win_over_the_environment() -> None:
    assert host_gpus(["2", "3"], {"CUDA_VISIBLE_DEVICES": "0,1"}) == ["2", "3"]
    assert host_gpus(None, {"CUDA_VISIBLE_DEVICES": "0, 1"}) == ["0", "1"]
    assert host_gpus(None, {"CUDA_VISIBLE_DEVICES": ""}) == []
    assert host_gpus(None, {}) == []


def test_a_gpu_named_twice_is_refused() -> None:
    with pytest.raises(EngineFailure, match="name one device twice"):
        host_gpus(["0", "0"])


def test_one_placement_a_gpu_else_gpu_less_slots() -> None:
    assert placements(["0", "1"], slots=5, base_port=9000) == [Placement(9000, "0"), Placement(9001, "1")]
    gpu_less = placements([], slots=3)
    assert [p.gpu for p in gpu_less] == [None, None, None]
    assert len({p.port for p in gpu_less}) == 3
    with pytest.raises(EngineFailure, match="at least one engine"):
        placements([], slots=0)


async def test_a_pool_lends_each_placement_to_one_engine_at_a_time() -> None:
    pool = PlacementPool([Placement(9000, "0"), Placement(9001, "1")])
    held: list[Placement] = []
    most = 0

    async def engine() -> None:
        nonlocal most
        async with pool.lease() as placement:
            assert placement not in held
            held.append(placement)
            most = max(most, len(held))
            await asyncio.sleep(0.01)
            held.remove(placement)

    await asyncio.gather(*(engine() for _ in range(6)))
    assert most == 2
    assert pool.idle == 2
