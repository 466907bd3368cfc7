"""`vllm-autoscale experiment` on emulator processes whose capacities are computed from their parameters.

**The capacity of an emulated engine** (the derivation is `test_profile_emulators`'s): a request of
`P` prompt and `O` output tokens holds one of `N` slots for `O` steps; a full batch's mean step is
`T = step_base + step_per_seq * N + step_per_prefill_token * (P - 1) * N / O`, so the engine completes
`C = N / (O * T)` requests per emulated second. With an SLO loose enough not to bind, C is where
the queue stops being stable: the knee, and the long-context boundary.

**The verdicts:** a catalog of a 4-slot baseline, an 8-slot variant (C 1.5x: supported), a 2-slot
one (C 0.6x: rejected), one whose per-request step cost is 5 % higher (C 1.3 % lower, inside the
spread of three seeds of short steps: open) and one with a flag the emulator does not know (blocked,
with its parser's words as the reason), run three at a time as separate processes.

**The boundary:** an engine whose prefill dominates its step (0.4 ms a prompt token against 8 ms of
the rest), so long prompts fill its steps and queue; at a fixed 2 req/s the prompt length where C
falls to 2, and at a fixed 2,048-token prompt the rate C, each found by the search within 15 %.

**On virtual time.** Both catalogs run with `--in-process`: the engines are emulators in the
experiment's own process, on one `lab.virtual_time` loop, talking HTTP over loopback. The verdicts
follow from the engines' parameters and the seeds, not from the CPU a loaded machine leaves (on the
wall clock, a fresh clone on 2 cores read the baseline's knee over three seeds as 2.82-4.34 req/s and
called the 1.5x variant "open"; on virtual time the same seeds read 3.77-4.02). Each costs ~32 s of
CPU (2026-11-28), and the two run side by side. Steps are 2 s of loop time at 12x for the verdicts
(60-160 requests a window) and 5 s at 20x for the boundary. The engine processes, their ports and
signals are what `test_sigterm_stops_every_engine_and_writes_a_partial_record` (below) and
`test_experiment_faults.py` run on the wall clock.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.emulator.params import EngineParams
from tests.integration import procs
from tests.integration.emulated_capacity import capacity

pytestmark = pytest.mark.integration

EMULATE = f"{sys.executable} -m adapter emulate --base-port {{port}} --model m --seed 1"
PROMPT, OUTPUT = 128, 32
#: the verdict catalog's tolerance, the catalog's default: a difference below it is no finding
TOLERANCE = 0.03
BASE = EngineParams(
    max_num_seqs=4, step_base_seconds=0.02, step_per_seq_seconds=0.002, step_per_prefill_token_seconds=0.0001
)
VARIANTS = {
    "seqs-8": EngineParams(**{**vars(BASE), "max_num_seqs": 8}),
    "seqs-2": EngineParams(**{**vars(BASE), "max_num_seqs": 2}),
    "per-seq-2.1ms": EngineParams(**{**vars(BASE), "step_per_seq_seconds": 0.0021}),
}
FLAGS = {
    "seqs-8": "--max-num-seqs 8",
    "seqs-2": "--max-num-seqs 2",
    "per-seq-2.1ms": "--step-per-seq-seconds 0.0021",
}
PREFILL_BOUND = EngineParams(
    max_num_seqs=4, step_base_seconds=0.004, step_per_seq_seconds=0.001, step_per_prefill_token_seconds=0.0004
)
FIXED_RATE, LONG_PROMPT = 2.0, 2048
LOOSE_SLO = {"ttft": "60s", "tpot": "10s"}
_TIMEOUT = 240


def prompt_at(p: EngineParams, rate: float, output: float) -> float:
    """The prompt length at which C falls to `rate`: T = N / (O * rate), solved for P."""
    n = p.max_num_seqs
    step = n / (output * rate)
    return 1 + (step - p.step_base_seconds - p.step_per_seq_seconds * n) * output / (
        p.step_per_prefill_token_seconds * n
    )


def engine_command(p: EngineParams, time_scale: float) -> str:
    return (
        f"{EMULATE} --time-scale {time_scale:g} --max-num-seqs {p.max_num_seqs} --step-base-seconds "
        f"{p.step_base_seconds} --step-per-seq-seconds {p.step_per_seq_seconds} "
        f"--step-per-prefill-token-seconds {p.step_per_prefill_token_seconds}"
    )


def verdict_catalog() -> dict[str, Any]:
    return {
        "engine": {
            "command": engine_command(BASE, 12),
            "model": "m",
            "time_scale": 12,
            "ready_within": "60s",
        },
        "variants": [
            {"name": "baseline"},
            *({"name": n, "flags": f} for n, f in FLAGS.items()),
            {"name": "bad-flag", "flags": "--no-such-flag 3"},
        ],
        "workload": {"prompt_tokens": PROMPT, "output_tokens": OUTPUT},
        "slo": LOOSE_SLO,
        "seeds": [0, 1, 2],
        # The catalog's default tolerance (3 %): the per-seq-2.1ms variant's computed capacity is
        # 1.3 % below the baseline's, under it, so its verdict is open by the catalog's own rule. (On
        # the wall clock a loaded run read 4.4 % apart and the tolerance was widened to 5 %; on
        # virtual time the seeds read 1.2 % apart, and the default holds.)
        "measure": {"step": "2s", "settle": "0.5s", "clients": 24, "knee_steps": 3},
        "questions": {"cost": {"rate": 3}},
    }


def boundary_catalog() -> dict[str, Any]:
    return {
        "engine": {
            "command": engine_command(PREFILL_BOUND, 20),
            "model": "m",
            "time_scale": 20,
            "ready_within": "60s",
        },
        "variants": [{"name": "long-context"}],
        "workload": {"prompt_tokens": PROMPT, "output_tokens": OUTPUT},
        "slo": LOOSE_SLO,
        "seeds": [0, 1, 2],
        "measure": {"step": "5s", "settle": "1s", "clients": 24},
        "questions": {
            "capacity": False,
            "boundary": {
                "prompt": {"rate": FIXED_RATE, "output_tokens": OUTPUT, "low": 700, "high": 1600, "steps": 3},
                "rate": {"prompt_tokens": LONG_PROMPT, "output_tokens": OUTPUT, "steps": 4},
            },
        },
    }


def experiment_command(root: Path, catalog: dict[str, Any], slots: int, *extra: str) -> list[str]:
    """`python -m adapter experiment` on `catalog` (written into `root`), its record in `root/out`."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "catalog.yaml"
    path.write_text(yaml.safe_dump(catalog), encoding="utf-8")
    return [
        sys.executable,
        "-m",
        "adapter",
        "experiment",
        str(path),
        "--out",
        str(root / "out"),
        "--slots",
        str(slots),
        *extra,
    ]


def experiment(root: Path, catalog: dict[str, Any], slots: int) -> tuple[int, dict[str, Any], str]:
    """Run the experiment to its end on virtual time; its exit status, JSON record and output."""
    command = experiment_command(root, catalog, slots, "--in-process")
    done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT, check=False)
    record = json.loads((root / "out" / "experiment.json").read_text())
    return done.returncode, record, done.stdout[-6000:] + done.stderr[-2000:]


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, dict[str, Any], str]]:
    """Both catalogs, at once (each CPU only, one process each)."""
    root = tmp_path_factory.mktemp("experiments")
    with ThreadPoolExecutor(2) as pool:
        verdicts = pool.submit(experiment, root / "verdicts", verdict_catalog(), 3)
        boundary = pool.submit(experiment, root / "boundary", boundary_catalog(), 1)
        return {"verdicts": verdicts.result(), "boundary": boundary.result()}


def _row(record: dict[str, Any], question: str, variant: str) -> dict[str, Any]:
    return next(r for r in record["rows"] if r["question"] == question and r["variant"] == variant)


def _expected(params: EngineParams) -> str:
    """The verdict the computed capacities call for: beyond 15 % a finding, within the catalog's
    tolerance none."""
    ratio = capacity(params, PROMPT, OUTPUT) / capacity(BASE, PROMPT, OUTPUT)
    if ratio > 1.15:
        return "supported"
    if ratio < 0.85:
        return "rejected"
    assert abs(ratio - 1) < TOLERANCE, f"{ratio}: make the variant a clear case"
    return "open"


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_variant_gets_the_verdict_its_computed_capacity_calls_for(
    name: str, records: dict[str, tuple[int, dict[str, Any], str]]
) -> None:
    """Larger slot count supported, smaller rejected, a 1.3 % change open; the seeds' saturated
    throughput within 10 % of the computed capacity (the closed loop keeps a queue standing)."""
    _status, record, output = records["verdicts"]
    row = _row(record, "capacity", name)
    assert row["verdict"] == _expected(VARIANTS[name]), output
    saturated = next(c for c in row["counts"] if c["name"] == "saturated")["variant"]
    assert saturated["value"] == pytest.approx(capacity(VARIANTS[name], PROMPT, OUTPUT), rel=0.10)
    assert saturated["repeats"] == 3


def test_the_baseline_is_the_reference_and_its_knee_lies_below_its_capacity(
    records: dict[str, tuple[int, dict[str, Any], str]],
) -> None:
    _status, record, _output = records["verdicts"]
    row = _row(record, "capacity", "baseline")
    knee = next(c for c in row["counts"] if c["name"] == "knee")["baseline"]
    assert row["verdict"] == "reference"
    assert 0.6 * capacity(BASE, PROMPT, OUTPUT) <= knee["value"] <= capacity(BASE, PROMPT, OUTPUT)
    assert knee["low"] <= knee["value"] <= knee["high"]


def test_a_bad_flag_is_blocked_with_its_reason_and_the_rest_goes_on(
    records: dict[str, tuple[int, dict[str, Any], str]], tmp_path: Path
) -> None:
    status, record, output = records["verdicts"]
    assert status == 1, output  # one variant blocked
    row = _row(record, "capacity", "bad-flag")
    assert row["verdict"] == "blocked"
    assert "unrecognized arguments: --no-such-flag 3" in row["why"]
    engines = {e["variant"]: e for e in record["engines"]}
    assert engines["bad-flag"]["state"] == "blocked"
    assert Path(engines["bad-flag"]["log"]).is_file()
    assert {e["state"] for n, e in engines.items() if n != "bad-flag"} == {"done"}


def test_the_record_is_written_beside_its_picture(
    records: dict[str, tuple[int, dict[str, Any], str]],
) -> None:
    _status, record, _output = records["verdicts"]
    out = Path(record["engines"][0]["log"]).parents[1]
    markdown = (out / "experiment.md").read_text()
    assert "| capacity | seqs-8 |" in markdown and "**supported**" in markdown
    assert (out / "experiment.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    steps = json.loads((out / "steps" / "seqs-8.json").read_text())
    assert {s["seed"] for s in steps} == {0, 1, 2}


def test_the_long_context_boundary_is_where_the_computed_capacity_says(
    records: dict[str, tuple[int, dict[str, Any], str]],
) -> None:
    """The prompt length at 2 req/s and the rate at 2,048-token prompts, each the seeds' mean of the
    highest value that held, within 15 % of where C reaches the fixed rate (prompt) and of C (rate)."""
    _status, record, output = records["boundary"]
    prompt = next(c for c in _row(record, "boundary-prompt", "long-context")["counts"])["baseline"]
    rate = next(c for c in _row(record, "boundary-rate", "long-context")["counts"])["baseline"]
    assert prompt["value"] == pytest.approx(prompt_at(PREFILL_BOUND, FIXED_RATE, OUTPUT), rel=0.15), output
    assert rate["value"] == pytest.approx(capacity(PREFILL_BOUND, LONG_PROMPT, OUTPUT), rel=0.15), output
    assert prompt["repeats"] == rate["repeats"] == 3


@pytest.fixture
def stoppable(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    catalog = {**boundary_catalog(), "questions": {"capacity": True}}
    command = experiment_command(tmp_path, catalog, 1)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield process, tmp_path / "out"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_sigterm_stops_every_engine_and_writes_a_partial_record(
    stoppable: tuple[subprocess.Popen[str], Path],
) -> None:
    process, out = stoppable
    assert process.stdout is not None
    port = healthy = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and healthy is None:
        line = process.stdout.readline()
        if "starting" in line:
            port = int(line.split("--base-port ")[1].split()[0])
        healthy = port if "healthy after" in line else None
    assert healthy is not None, "the engine never became healthy"
    time.sleep(1.0)  # into the first step
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 130
    record = json.loads((out / "experiment.json").read_text())
    assert record["complete"] is False and record["stopped"]
    assert record["engines"][0]["state"] == "stopped"
    with pytest.raises(urllib.error.URLError, match="refused"):
        procs.http_get(f"http://127.0.0.1:{port}/health", timeout=0.5)
