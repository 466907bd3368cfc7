"""`vllm-autoscale experiment` under engine faults, on emulator processes: the run goes on, and its
record says the truth.

One run of five variants on two slots, each variant a fault (the engine's start and stop are the
emulator's own; the faults the test causes are caused once the run says the engine is healthy):

* **baseline**: healthy, measured on three seeds;
* **never-healthy**: its cold start (`--load-delay`) is longer than `ready_within`: blocked;
* **dies**: SIGKILLed once healthy, while it is measured: failed, with the exit as the reason;
* **hangs**: SIGSTOPped once healthy (alive, answering nothing): failed once `/health` has been
  silent for `unresponsive_after`, then stopped all the same (SIGTERM resumes it first);
* the run starts its engines from `--base-port`, whose first port the test holds listening: the
  baseline, first on it, exits saying the address is in use and is started again on another port.

A second run is stopped with SIGTERM while its first of two variants is measured, on one slot: the
record is written, the first is **stopped** with the seeds it finished, the second **never run**.
A third run, on two slots, measures a baseline beside **stalls**, an engine whose every step lasts
longer than a measurement step: healthy, it answers its warm-up, yet completes nothing at
saturation. Each of its seeds fails with that reason and the run goes on.

After each run no engine process is left. Steps are short (1 s at 12x the wall clock, a quarter
second for the third run); nothing sleeps and then asserts: the test reads the run's progress lines
and polls for states.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration import rehearsals
from tests.integration.test_experiments_emulators import EMULATE, experiment_command
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

ENGINE = f"{EMULATE} --time-scale 12 --max-num-seqs 4 --step-base-seconds 0.02"


def catalog(marker: str, variants: list[dict[str, str]]) -> dict[str, Any]:
    return {
        # the marker, the served model's name (a later --model wins), finds this test's processes
        "engine": {
            "command": f"{ENGINE} --model {marker}",
            "model": marker,
            "time_scale": 12,
            # an emulator's cold start is its Python's imports: 3.5 s on a busy 2-core machine
            "ready_within": "15s",
            "unresponsive_after": "1s",
        },
        "variants": variants,
        "workload": {"prompt_tokens": 32, "output_tokens": 8},
        "slo": {"ttft": "60s", "tpot": "10s"},
        "seeds": [0, 1, 2],
        "measure": {"step": "1s", "settle": "0.3s", "clients": 8, "knee_steps": 1},
    }


class Run:
    """An experiment process, its progress lines read as they come."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []

    def until(self, text: str) -> str:
        """The first line that holds `text` (the run's own word that a state was reached), read already
        or read now: on a loaded machine the slots' lines come in either order."""
        assert self.process.stdout is not None
        for line in self.lines:
            if text in line:
                return line
        for line in self.process.stdout:
            self.lines.append(line)
            if text in line:
                return line
        raise AssertionError(f"the run ended without {text!r}:\n{''.join(self.lines[-40:])}")

    def engine_pid(self, variant: str) -> int:
        """The pid of `variant`'s engine: the process listening on the port its start line names."""
        start = next(line for line in reversed(self.lines) if f"] {variant}: starting" in line)
        port = start.split("--base-port ")[1].split()[0]
        pids = rehearsals.processes_with(f"--base-port {port} ")
        assert len(pids) == 1, pids
        return pids[0]

    def finish(self) -> str:
        output, _ = self.process.communicate(timeout=120)
        return "".join(self.lines) + output


@pytest.fixture
def marker() -> Iterator[str]:
    name = rehearsals.marker()
    yield name
    for pid in rehearsals.processes_with(name):  # a failed test's leftovers: only this test's engines
        os.kill(pid, signal.SIGKILL)


def test_every_fault_is_recorded_with_its_reason_and_the_rest_is_measured(
    tmp_path: Path, marker: str
) -> None:
    variants = [
        {"name": "baseline"},
        {"name": "never-healthy", "flags": "--load-delay 6000"},  # 500 s of the wall clock
        {"name": "dies"},
        {"name": "hangs"},
        {"name": "same"},
    ]
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        # the 2 slots are the ports `taken` and `taken + 1`: the first variants start on them
        command = [*experiment_command(tmp_path, catalog(marker, variants), 2), "--base-port", str(taken)]
        run = Run(command)
        try:
            for victim, sig in (("dies", signal.SIGKILL), ("hangs", signal.SIGSTOP)):
                run.until(f"] {victim}: healthy after")
                os.kill(run.engine_pid(victim), sig)
            output = run.finish()
        finally:
            if run.process.poll() is None:
                run.process.kill()
                run.process.wait()
    assert run.process.returncode == 1, output[-4000:]  # some variants failed; the record is complete
    record = json.loads((tmp_path / "out" / "experiment.json").read_text())
    engines = {e["variant"]: e for e in record["engines"]}
    assert record["complete"] is True
    assert {n: e["state"] for n, e in engines.items()} == {
        "baseline": "done",
        "never-healthy": "blocked",
        "dies": "failed",
        "hangs": "failed",
        "same": "done",
    }
    assert "not ready" in engines["never-healthy"]["blocked"]
    assert "exited with code -9" in engines["dies"]["blocked"]
    assert "stopped answering /health for 1s" in engines["hangs"]["blocked"]
    assert f"port {taken} was taken" in " ".join(engines["baseline"]["notes"]), output[-3000:]
    for name in ("baseline", "same"):
        assert [r["complete"] for r in engines[name]["repeats"]] == [True] * 3
    rows = {(r["question"], r["variant"]): r["verdict"] for r in record["rows"]}
    assert rows[("capacity", "never-healthy")] == rows[("capacity", "dies")] == "blocked"
    assert rows[("capacity", "same")] in ("open", "supported", "rejected")  # judged: 3 seeds a side
    ran = record["ran"]
    assert [line.split(":")[0] for line in ran["measured"]] == ["baseline", "same"]
    assert len(ran["failed"]) == 3 and ran["never run"] == []
    assert "## What ran" in (tmp_path / "out" / "experiment.md").read_text()
    wait_for(lambda: not rehearsals.processes_with(marker), timeout=10, what="every engine gone")


def test_sigterm_mid_run_writes_the_record_with_what_was_never_run(tmp_path: Path, marker: str) -> None:
    variants = [{"name": "first"}, {"name": "second"}]
    run = Run(experiment_command(tmp_path, catalog(marker, variants), 1))
    try:
        run.until("] first: seed 0 knee:")  # into its measuring: one step done
        run.process.send_signal(signal.SIGTERM)
        output = run.finish()
    finally:
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait()
    assert run.process.returncode == 130, output[-3000:]
    record = json.loads((tmp_path / "out" / "experiment.json").read_text())
    engines = {e["variant"]: e for e in record["engines"]}
    assert record["complete"] is False and record["stopped"]
    assert engines["first"]["state"] == "stopped" and engines["second"]["state"] == "never run"
    assert engines["second"]["repeats"] == [] and engines["second"]["placement"] is None
    rows = {r["variant"]: r for r in record["rows"] if r["question"] == "capacity"}
    assert rows["second"]["verdict"] == "stopped" and rows["second"]["why"].startswith("never run")
    assert rows["first"]["verdict"] == "stopped" and "stopped while measuring" in rows["first"]["why"]
    wait_for(lambda: not rehearsals.processes_with(marker), timeout=10, what="every engine gone")


def test_a_variant_that_completes_nothing_at_saturation_fails_its_seeds_and_the_run_goes_on(
    tmp_path: Path, marker: str
) -> None:
    # Each engine step of "stalls" lasts 36 emulated seconds (3 wall seconds): the engine is healthy
    # and answers the warm-up (two steps: requests of 2 tokens), but a measurement step (1.5 s settle
    # + 0.25 s window of the wall clock) sees no token: the emulator counts a step's tokens when the
    # step begins, at the clients' arrival (inside the settle, even when a loaded machine delays them
    # by a second), and the next begins 3 s later, after the window. (With 8 s steps and a 0.1 s
    # settle, a fresh clone on 2 cores once counted the first step inside the window.)
    variants = [{"name": "baseline"}, {"name": "stalls", "flags": "--step-base-seconds 36"}]
    spec = catalog(marker, variants)
    spec["workload"]["output_tokens"] = 2
    spec["measure"].update(step="0.25s", settle="1.5s")
    run = Run(experiment_command(tmp_path, spec, 2))
    try:
        output = run.finish()
    finally:
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait()
    # Every variant ran (a seed's failure is not its variant's: docs/experiments.md), so status 0.
    assert run.process.returncode == 0, output[-4000:]
    record = json.loads((tmp_path / "out" / "experiment.json").read_text())
    engines = {e["variant"]: e for e in record["engines"]}
    assert record["complete"] is True
    assert {n: e["state"] for n, e in engines.items()} == {"baseline": "done", "stalls": "done"}
    reason = "the engine completed nothing at saturation (8 clients for 0.25s): no knee to search below it"
    stalled = engines["stalls"]["repeats"]
    assert [(r["seed"], r["complete"], r["failed"], r["saturated"]) for r in stalled] == [
        (seed, False, reason, None) for seed in (0, 1, 2)
    ]  # each seed failed with its reason, and the next one ran all the same
    assert f"stalls: seed 2 failed: {reason}" in output
    # The rest of the run went on: the baseline measured on its three seeds.
    assert [r["complete"] for r in engines["baseline"]["repeats"]] == [True] * 3
    assert engines["baseline"]["repeats"][0]["saturated"] > 0
    # The record says so: measured with its failed seeds, and not judged (no complete seed).
    measured = dict(line.split(": ", 1) for line in record["ran"]["measured"])
    assert measured["stalls"].startswith("0 of 3 seeds complete; seed 0 failed: the engine completed nothing")
    assert record["ran"]["failed"] == [] and record["ran"]["never run"] == []
    rows = {(r["question"], r["variant"]): r for r in record["rows"]}
    assert rows[("capacity", "stalls")]["verdict"] == "open"
    assert "too few complete seeds" in rows[("capacity", "stalls")]["why"]
    assert "seed 0 failed: the engine completed nothing" in (tmp_path / "out" / "experiment.md").read_text()
    wait_for(lambda: not rehearsals.processes_with(marker), timeout=10, what="every engine gone")
