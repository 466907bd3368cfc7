"""`vllm-autoscale profile --launch` on the wall clock, as a user runs it: the command starts an emulator
process, records its cold start, profiles it over HTTP between processes and stops it.

The engine and workload are `test_profile_emulators`'s six-slot engine, whose capacity is computed from
its parameters there; this test is apart from that file so that its two minutes, mostly spent waiting
on the wall clock, overlap other work on another pytest-xdist worker instead of lengthening that file's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lab.emulator.params import EngineParams
from lab.profile.schema import load
from tests.integration import procs
from tests.integration.test_profile_emulators import BUDGET, ENGINES, workload_file

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def test_profile_launches_an_emulator_process_and_finds_its_knee_over_http(tmp_path: Path) -> None:
    """`vllm-autoscale profile --launch "vllm-autoscale emulate ..."` on the wall clock, as a user runs
    it: the command starts the six-slot engine's emulator process (5 emulated seconds of cold start,
    which it records), profiles it over HTTP between processes and stops it at the end. The knee is
    what the machine let the two processes measure; its bound is the recorded spread below."""
    engine = ENGINES[1]
    port = procs.free_port()
    url = f"http://127.0.0.1:{port}"
    scale = f"{engine.time_scale:g}"
    given = {f.name: getattr(engine.params, f.name) for f in dataclasses.fields(EngineParams)}
    flags = [
        f"--{k.replace('_', '-')}={v}"
        for k, v in given.items()
        if v != EngineParams.__dataclass_fields__[k].default
    ]
    emulate = (
        f"-m adapter emulate --base-port {port} --model m --time-scale {scale} --seed 1 --load-delay 5"
    ).split()
    launch = shlex.join([sys.executable, *emulate, *flags])
    profile = (
        f"-m adapter profile --url {url} --model m --time-scale {scale} --budget {BUDGET:g}s --plain".split()
    )
    slo = ["--slo-ttft", "60s", "--slo-tpot", "10s"]
    files = ["--workload", str(workload_file(tmp_path)), "--out", str(tmp_path / "out")]
    command = [sys.executable, *profile, *slo, "--launch", launch, *files]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    output = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, output
    found = load(tmp_path / "out" / "profile.json")
    assert found.cold_start_seconds is not None and found.cold_start_seconds >= 5.0, output
    assert not _listening(url), "profile --launch left the server it started running"
    assert found.knee is not None, output
    # knee / C, recorded over 10 runs of this test on the shared 2-core VM (2026-11-28): five at its
    # usual load (load average 2-6) read 0.924, 0.926, 0.927, 0.929, 0.929; five beside a CPU hog
    # (`python -c 'while True: pass'`, load 3-7) read 0.926, 0.940, 0.910, 0.915, 0.949. On virtual
    # time the same profile reads 0.924. Mean 0.928; the loaded five spread with a standard deviation
    # of 0.017, and the bound is the mean within 4 of those: 0.86 to 0.99.
    assert 0.86 <= found.knee.rate / engine.capacity() <= 0.99, output


def _listening(url: str) -> bool:
    with contextlib.suppress(OSError):
        procs.http_get(url + "/health", timeout=0.5)
        return True
    return False
