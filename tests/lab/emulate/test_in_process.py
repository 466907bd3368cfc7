"""`InProcessEmulator`: an emulator engine in this process that starts, fails and stops as an engine
process does (`lab.engine.process.EngineProcess`), on the running loop's clock."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import aiohttp
import pytest

from lab import virtual_time
from lab.emulate.in_process import InProcessEmulator
from lab.engine.placement import free_port
from lab.engine.ports import on_a_free_port, port_taken
from lab.engine.process import EngineFailure, Placement

COMMAND = "python -m adapter emulate --base-port {port} --model m --load-delay 30 --time-scale 10"


def test_it_is_ready_after_its_load_delay_on_virtual_time_and_stops(tmp_path: Path) -> None:
    async def main() -> tuple[float, int, bool, int | None]:
        engine = InProcessEmulator.from_template(COMMAND, Placement(free_port()), tmp_path / "e.log")
        async with aiohttp.ClientSession() as session:
            healthy_after = await engine.start(session, ready_within=60)
            async with session.get(engine.url + "/health") as response:
                status = response.status
            watch = asyncio.ensure_future(engine.watch(session, 20))
            running = engine.running
            code = await engine.stop()
            assert "stopped" in await watch
        return healthy_after, status, running, code

    healthy_after, status, running, code = virtual_time.run(main())
    # 30 emulated seconds at 10x: 3 s of the loop, exactly, whatever the machine's load.
    assert healthy_after == pytest.approx(3.0, abs=0.3)
    assert (status, running, code) == (200, True, 0)
    assert "in process" in (tmp_path / "e.log").read_text()


def test_a_bad_flag_fails_the_start_with_the_parsers_words(tmp_path: Path) -> None:
    async def main() -> None:
        engine = InProcessEmulator.from_template(
            COMMAND + " --no-such-flag 3", Placement(free_port()), tmp_path / "e.log"
        )
        async with aiohttp.ClientSession() as session:
            await engine.start(session, ready_within=60)

    with pytest.raises(EngineFailure, match="exited with code 2") as failure:
        virtual_time.run(main())
    assert "unrecognized arguments: --no-such-flag 3" in failure.value.log_tail


def test_a_taken_port_is_retried_on_another_as_for_a_process(tmp_path: Path) -> None:
    """The bind fails as a process's would, so `on_a_free_port` starts it again elsewhere."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        retried: list[int] = []

        async def main() -> int:
            async with aiohttp.ClientSession() as session:

                async def attempt(port: int) -> int:
                    engine = InProcessEmulator.from_template(
                        COMMAND, Placement(port), tmp_path / f"{port}.log"
                    )
                    await engine.start(session, ready_within=60)
                    await engine.stop()
                    return port

                return await on_a_free_port(attempt, preferred=busy, retried=lambda p, f: retried.append(p))

        used = virtual_time.run(main())
    assert retried == [busy] and used != busy
    failure = EngineFailure("x", (tmp_path / f"{busy}.log").read_text())
    assert port_taken(failure)
