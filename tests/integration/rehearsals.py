"""`vllm-autoscale rehearse` on emulator processes, for the rehearsal's integration tests.

The engine is the emulator with the parameters `tests/data/rehearsal/ci-engine-profile.json` was
measured on (`vllm-autoscale profile --launch "<ENGINE at port P>" --url http://127.0.0.1:P --model
ci-engine --time-scale 10 --prompt-tokens 64 --output-tokens 8 --slo-ttft 2s --slo-tpot 1s
--max-num-seqs 16 --budget 240s`): 16 slots, requests of 8 tokens lasting ~2.5-4.5 emulated seconds,
about 3.3 requests per second per replica, at ten times the wall clock, so the rehearsal's emulated
minutes take a tenth of that. Each engine's load delay makes its cold start tens of seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Final

PROFILE: Final = Path(__file__).parents[1] / "data" / "rehearsal" / "ci-engine-profile.json"
TIME_SCALE: Final = 10.0
ENGINE_FLAGS: Final = (
    "--max-num-seqs 16 --step-base-seconds 0.3 --step-per-seq-seconds 0.015 "
    "--step-per-prefill-token-seconds 0.0005"
)


def engine(marker: str, load_delay: float = 20.0) -> str:
    """The engine command template; `marker` (its served model name) finds its processes."""
    return (
        f"{sys.executable} -m adapter emulate --base-port {{port}} --model {marker} "
        f"--time-scale {TIME_SCALE:g} --load-delay {load_delay:g} {ENGINE_FLAGS}"
    )


def marker() -> str:
    """A model name no other test's process carries."""
    return f"rehearsal-{uuid.uuid4().hex[:10]}"


def write_trace(path: Path, rates: list[tuple[float, float]], step: float = 5.0) -> Path:
    """A `time,arrivals` trace: (until, requests per second) pieces, held, on a `step` grid."""
    rows = ["time,arrivals"]
    t = 0.0
    for until, rate in rates:
        while t < until:
            rows.append(f"{t:g},{rate * step:g}")
            t += step
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def rehearse_command(out: Path, trace: Path, name: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "adapter",
        "rehearse",
        "--engine",
        engine(name),
        "--profile",
        str(PROFILE),
        "--model",
        name,
        "--trace",
        str(trace),
        "--time-scale",
        f"{TIME_SCALE:g}",
        "--out",
        str(out),
        "--plain",
        *extra,
    ]


def start(command: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def processes_with(text: str) -> list[int]:
    """Pids of live processes whose command line holds `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except (OSError, IndexError):
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found
