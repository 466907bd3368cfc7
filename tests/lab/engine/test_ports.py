"""Ports held from their choice until the engine has bound one, and a taken port retried elsewhere."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import aiohttp
import pytest

from lab.engine.ports import BIND_ATTEMPTS, Ports, on_a_free_port, port_taken
from lab.engine.process import EngineFailure, EngineProcess, Placement
from tests.lab.engine.test_process import SERVER

IN_USE = (
    "OSError: [Errno 98] error while attempting to bind on address ('127.0.0.1', 8000): address already "
    "in use"
)


def test_a_held_port_is_never_handed_out_twice() -> None:
    ports = Ports()
    first = ports.take()
    assert ports.take(preferred=first) != first, "the preferred port is held: another one"
    assert ports.held(first)
    ports.release(first)
    assert not ports.held(first) and ports.take(preferred=first) == first


def test_a_port_taken_is_read_off_the_engines_last_lines() -> None:
    assert port_taken(EngineFailure("the engine exited with code 1", IN_USE))
    assert port_taken(
        EngineFailure("exited", "vllm-autoscale emulate: [Errno 98] unable to bind 127.0.0.1:1")
    )
    assert not port_taken(EngineFailure("exited", "error: unrecognized arguments: --no-such-flag"))


async def test_an_attempt_whose_port_was_taken_runs_again_on_another() -> None:
    ports, tried, retried = Ports(), [], []

    async def attempt(port: int) -> int:
        tried.append(port)
        assert ports.held(port), "held while the engine starts"
        if len(tried) == 1:
            raise EngineFailure("the engine exited with code 1 before it was ready", IN_USE)
        return port

    bound = await on_a_free_port(attempt, ports=ports, retried=lambda port, f: retried.append(port))
    assert bound == tried[1] != tried[0] and retried == tried[:1]
    assert not ports.held(tried[0]) and not ports.held(tried[1]), "bound: the engine holds it now"


async def test_other_failures_and_a_port_taken_every_time_are_the_engines_failure() -> None:
    ports, tried = Ports(), []

    async def unknown_flag(port: int) -> int:
        tried.append(port)
        raise EngineFailure("exited", "unrecognized arguments")

    with pytest.raises(EngineFailure, match="exited"):
        await on_a_free_port(unknown_flag, ports=ports)
    assert len(tried) == 1

    async def always_taken(port: int) -> int:
        tried.append(port)
        raise EngineFailure("exited", IN_USE)

    with pytest.raises(EngineFailure):
        await on_a_free_port(always_taken, ports=ports)
    assert len(tried) == 1 + BIND_ATTEMPTS and not any(ports.held(p) for p in tried)


async def test_a_real_engine_on_a_port_another_process_took_starts_on_another(tmp_path: Path) -> None:
    """The port asked for is bound by someone else between the choice and the engine's bind: the
    engine exits with Errno 98 and is started again on a fresh port, healthy there."""
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        async with aiohttp.ClientSession() as session:
            engines: list[EngineProcess] = []

            async def attempt(port: int) -> EngineProcess:
                engine = EngineProcess.from_template(
                    f"{sys.executable} {script} {{port}}", Placement(port), tmp_path / f"{port}.log"
                )
                engines.append(engine)
                await engine.start(session, ready_within=30)
                return engine

            engine = await on_a_free_port(attempt, preferred=taken)
            try:
                assert engine.placement.port != taken and engine.running
                assert [e.placement.port for e in engines] == [taken, engine.placement.port]
                assert "Address already in use" in engines[0].tail()
            finally:
                await engine.stop()
