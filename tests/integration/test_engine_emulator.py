"""The emulator as an engine process: what the live experiments and the rehearsal start in CI.

A real `vllm serve` needs a GPU; the emulator's command line stands in for it, and an engine flag it
does not know fails the way vLLM's parser does (exit 2, "unrecognized arguments" in the log).
"""

from __future__ import annotations

import sys
from pathlib import Path

import aiohttp
import pytest

from lab.engine.placement import free_port
from lab.engine.process import EngineFailure, EngineProcess, Placement

EMULATE = f"{sys.executable} -m adapter emulate --base-port {{port}} --model m --max-num-seqs 4"


async def test_the_emulator_serves_as_an_engine_and_stops(tmp_path: Path) -> None:
    engine = EngineProcess.from_template(EMULATE, Placement(free_port()), tmp_path / "engine.log")
    async with aiohttp.ClientSession() as session:
        try:
            await engine.start(session, ready_within=60)
            async with session.get(engine.url + "/metrics") as response:
                page = await response.text()
        finally:
            await engine.stop()
    assert 'vllm:num_requests_running{engine="0",model_name="m"}' in page
    assert not engine.running


async def test_an_unknown_engine_flag_blocks_with_the_parsers_words(tmp_path: Path) -> None:
    engine = EngineProcess.from_template(
        EMULATE + " --no-such-flag 3", Placement(free_port()), tmp_path / "e.log"
    )
    async with aiohttp.ClientSession() as session:
        with pytest.raises(EngineFailure, match="exited with code 2") as raised:
            await engine.start(session, ready_within=60)
    assert "unrecognized arguments: --no-such-flag 3" in raised.value.log_tail
