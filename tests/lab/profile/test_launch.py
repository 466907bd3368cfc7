"""`profile --launch`: the server started, timed until /health answers, and stopped with its children."""

from __future__ import annotations

import sys
from pathlib import Path

import aiohttp
import pytest

from lab.load.server import ProfileFailure
from lab.profile.launch import Launched, max_num_seqs
from tests.integration.procs import free_port

# The engine-process tests' server: it loads for 0.3 s, then answers /health; its child must die with it.
from tests.lab.engine.test_process import SERVER


async def test_the_cold_start_is_timed_and_the_server_stopped(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    port = free_port()
    launched = Launched(f"{sys.executable} {script} {port}", tmp_path / "server.log")
    async with aiohttp.ClientSession() as session:
        try:
            cold_start = await launched.start(session, f"http://127.0.0.1:{port}")
        finally:
            await launched.stop()
    assert cold_start >= 0.3
    assert launched.process is not None and launched.process.returncode is not None


async def test_a_server_that_exits_is_a_failure(tmp_path: Path) -> None:
    launched = Launched(f"{sys.executable} -c 'import sys; sys.exit(3)'", tmp_path / "server.log")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(
            ProfileFailure,
            match=r"the launched server exited with code 3 before it was ready \(see .*server.log\)",
        ):
            await launched.start(session, f"http://127.0.0.1:{free_port()}")


async def test_a_command_that_cannot_start(tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ProfileFailure, match="unable to start 'no-such-vllm-binary'"):
            await Launched("no-such-vllm-binary serve m", tmp_path / "log").start(
                session, "http://127.0.0.1:1"
            )


def test_max_num_seqs_of_a_command() -> None:
    assert max_num_seqs("vllm serve m --max-num-seqs 64 --port 8000") == 64
    assert max_num_seqs("vllm serve m --max-num-seqs=8") == 8
    assert max_num_seqs("vllm serve m") is None
