"""Which GPUs and ports a host lends to engines, one engine per GPU at a time.

The GPUs are a list given, else `CUDA_VISIBLE_DEVICES`, else (an emulator's host, no GPUs) a number of
GPU-less slots. Each slot has its own port, so engines side by side never share either.

A free port is chosen below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`, 32768-60999
by default) where the host says where that is (Linux): in that range the kernel hands ports out by
itself, to every outgoing connection of every process, so one found free there can be taken by a
client's connection before the engine binds it (a test's emulator lost its port that way on a busy
2-core run: "address already in use"). Below it only an explicit bind takes a port.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

from lab.engine.process import EngineFailure, Placement


def gpu_flag(text: str | None) -> list[str] | None:
    """The GPUs a `--gpus 0,1` flag names (None when not given); an empty item is kept, for
    `host_gpus` to refuse."""
    return None if not text else [gpu.strip() for gpu in text.split(",")]


def host_gpus(given: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The GPUs to use: those `given`, else `CUDA_VISIBLE_DEVICES` ("" or unset: none)."""
    if given:
        gpus = [gpu.strip() for gpu in given]
    else:
        visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES", "")
        gpus = [gpu.strip() for gpu in visible.split(",") if gpu.strip()]
    if any(not gpu for gpu in gpus):
        raise EngineFailure(f"a GPU in {list(given or [])!r} is empty: give device indices or UUIDs")
    if len(set(gpus)) != len(gpus):
        raise EngineFailure(f"GPUs {gpus!r} name one device twice: one engine per GPU")
    return gpus


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Above the ports services commonly listen on, below Linux's default ephemeral range.
_LOWEST_PORT = 20000
_PORT_TRIES = 50
# Its own source of draws: processes side by side that seeded the global generator alike (a seeded run)
# would otherwise try the same ports in the same order.
_DRAW = random.SystemRandom()


def _ephemeral_start() -> int:
    """The lowest port the kernel hands out by itself, where the host says (Linux), else 0."""
    try:
        return int(_EPHEMERAL_RANGE.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _candidate(count: int, first: int) -> int:
    """A base port to try: at random below `first` where there is room, else the OS's pick."""
    if first - count > _LOWEST_PORT:
        return _DRAW.randrange(_LOWEST_PORT, first - count + 1)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_port_range(count: int) -> int:
    """A base port P with P..P+count-1 free on loopback now (`--base-port`: consecutive ports)."""
    first = _ephemeral_start()
    for _ in range(_PORT_TRIES):
        base = _candidate(count, first)
        with contextlib.ExitStack() as probes:
            try:
                for port in range(base, base + count):
                    probes.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)).bind(
                        ("127.0.0.1", port)
                    )
            except OSError:
                continue
            return base
    raise EngineFailure(f"no {count} consecutive free ports found on loopback in {_PORT_TRIES} tries")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    return free_port_range(1)


def placements(gpus: Sequence[str], slots: int, base_port: int | None = None) -> list[Placement]:
    """One placement a GPU; with no GPUs, `slots` GPU-less ones. Ports from `base_port` on, else free ones."""
    if slots < 1:
        raise EngineFailure(f"slots {slots}: at least one engine must be able to run")
    devices: list[str | None] = list(gpus) if gpus else [None] * slots
    return [
        Placement(base_port + index if base_port is not None else free_port(), gpu)
        for index, gpu in enumerate(devices)
    ]


class PlacementPool:
    """Placements handed out one engine at a time: `async with pool.lease() as placement:`."""

    def __init__(self, available: Sequence[Placement]) -> None:
        if not available:
            raise EngineFailure("no placement to run an engine on")
        self.size = len(available)
        self._free: asyncio.Queue[Placement] = asyncio.Queue()
        for placement in available:
            self._free.put_nowait(placement)

    @property
    def idle(self) -> int:
        return self._free.qsize()

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[Placement]:
        placement = await self._free.get()
        try:
            yield placement
        finally:
            self._free.put_nowait(placement)
