"""GPUs and ports for engines side by side: one engine per GPU, each on its own port."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from lab.engine import placement
from lab.engine.placement import PlacementPool, free_port_range, host_gpus, placements
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


def _bound(port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    return sock


def test_a_free_range_lies_below_the_ports_the_kernel_hands_out_itself() -> None:
    """Where the kernel's ephemeral range starts (Linux), every port of the range is below it and free."""
    first = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii").split()[0])
    base = free_port_range(3)
    assert base >= 20000 and base + 2 < first
    for sock in [_bound(port) for port in range(base, base + 3)]:
        sock.close()


def test_a_range_with_a_port_taken_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _bound(free_port_range(1))
    busy = int(taken.getsockname()[1])
    free = free_port_range(1)
    tries = iter([busy - 1, free])  # the first range's second port is the one held
    monkeypatch.setattr(placement._DRAW, "randrange", lambda low, high: next(tries))
    with taken:
        assert free_port_range(2) == free
        monkeypatch.setattr(placement._DRAW, "randrange", lambda low, high: busy)
        with pytest.raises(EngineFailure, match="no 1 consecutive free ports"):
            free_port_range(1)


def test_without_the_kernels_range_the_os_picks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """macOS has no /proc: the port is the one `bind(0)` gets, which nothing listens on."""
    monkeypatch.setattr(placement, "_EPHEMERAL_RANGE", tmp_path / "absent")
    monkeypatch.setattr(placement._DRAW, "randrange", lambda low, high: pytest.fail("no range to draw in"))
    _bound(free_port_range(1)).close()
