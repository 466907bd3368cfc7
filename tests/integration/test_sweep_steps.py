"""`bench/sweep_steps.py` as a real process against `vllm-autoscale emulate`, a replica of known capacity.

The emulated replica (`lab/emulator/params.py`): `N = 4` batch slots, steps of
`T = step_base + step_per_seq * N + step_per_prefill_token * (P - 1) * N / O` emulated seconds in a full
batch, each request holding a slot for `O` steps, so it completes `C = N / (O * T)` requests per
emulated second (the derivation is in `test_profile_emulators.py`'s docstring). At `--time-scale S`
the emulator runs `S` emulated seconds per real one, and the sweep's seconds are real, so its
capacity is `S * C` requests per real second: about 10 here. The sweep runs two 3 s steps: one at
about 0.3 of it (no queue), one at about 1.7 times it (the queue grows by about `rate - capacity` a
second). The server's latency histograms are in emulated seconds: its TPOT is `S` times the
client's.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from lab.emulator.params import EngineParams
from tests.integration import procs
from tests.integration.emulated_capacity import capacity as full_batch_capacity

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "sweep_steps.py"
TIME_SCALE = 2.0
SLOTS, STEP_BASE, STEP_PER_SEQ, STEP_PER_PREFILL_TOKEN = 4, 0.04, 0.002, 5e-6
PROMPT, OUTPUT = 64, 16
STEP_SECONDS = 3.0
LOW, HIGH = 3.0, 18.0
WARMUP = 4
SLO_TTFT_SECONDS = 0.5
_TIMEOUT = 90

# The keys of shared/data/vllm-0.26.0-h100/steps-30s-real.jsonl, then the sweep's own.
REAL_KEYS = {
    "rate",
    "offered",
    "ok",
    "client_ttft_p50",
    "client_ttft_p90",
    "server_ttft_p90",
    "server_queue_mean",
    "waiting_mean",
    "waiting_max",
    "waiting_slope_per_s",
    "running_mean",
}
MORE_KEYS = {
    "step_seconds",
    "errors",
    "client_tpot_p50",
    "client_tpot_p90",
    "server_tpot_mean",
    "kv_usage_mean",
    "preemptions",
    "completed_in_step",
    "achieved_rate",
    "client_ttft_p99",
    "waiting_slope_whole_per_s",
    "slo_ttft_ok",
    "slo_tpot_ok",
}


def capacity() -> float:
    """Requests per real second the emulated replica completes with every slot busy."""
    params = EngineParams(
        max_num_seqs=SLOTS,
        step_base_seconds=STEP_BASE,
        step_per_seq_seconds=STEP_PER_SEQ,
        step_per_prefill_token_seconds=STEP_PER_PREFILL_TOKEN,
    )
    return TIME_SCALE * full_batch_capacity(params, PROMPT, OUTPUT)


def emulator(workdir: Path) -> contextlib.AbstractContextManager[str]:
    """The emulated replica of this module's parameters (`procs.emulator`)."""
    return procs.emulator(
        workdir,
        [
            "--time-scale",
            str(TIME_SCALE),
            "--seed",
            "1",
            "--max-num-seqs",
            str(SLOTS),
            "--step-base-seconds",
            str(STEP_BASE),
            "--step-per-seq-seconds",
            str(STEP_PER_SEQ),
            "--step-per-prefill-token-seconds",
            str(STEP_PER_PREFILL_TOKEN),
        ],
    )


def served(url: str) -> tuple[float, float]:
    """(requests finished, prompt tokens) as the emulator counts them for model `m`."""
    status, body = procs.http_get(url + "/metrics")
    assert status == 200
    finished = prompt = 0.0
    for line in body.decode().splitlines():
        if 'model_name="m"' not in line:
            continue
        if line.startswith("vllm:request_success_total{"):
            finished += float(line.rsplit(" ", 1)[1])
        elif line.startswith("vllm:prompt_tokens_total{"):
            prompt += float(line.rsplit(" ", 1)[1])
    return finished, prompt


def sweep(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *flags], capture_output=True, text=True, timeout=_TIMEOUT, check=False
    )


def _no_nan(constant: str) -> None:
    raise AssertionError(f"{constant} in the output: not JSON")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], str, tuple[float, float]]:
    """The two steps against a fresh emulator: the JSON lines, what the script printed, and the
    emulator's own count of what it served."""
    workdir = tmp_path_factory.mktemp("sweep")
    out = workdir / "sweep.jsonl"
    with emulator(workdir) as url:
        done = sweep(
            "--url",
            url,
            "--model",
            "m",
            "--rates",
            f"{LOW:g},{HIGH:g}",
            "--step",
            f"{STEP_SECONDS:g}s",
            "--gap",
            "0s",
            "--prompt-tokens",
            str(PROMPT),
            "--output-tokens",
            str(OUTPUT),
            "--processes",
            "2",
            "--warmup",
            str(WARMUP),
            "--sample-interval",
            "250ms",
            "--slo-ttft",
            f"{SLO_TTFT_SECONDS * 1000:g}ms",
            "--slo-tpot",
            "1s",
            "--seed",
            "3",
            "--drain-timeout",
            "30s",
            "--out",
            str(out),
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        counted = served(url)
    lines = [json.loads(line, parse_constant=_no_nan) for line in out.read_text().splitlines()]
    return lines, done.stdout, counted


def test_one_line_per_rate_with_every_key(run: tuple[list[dict[str, Any]], str, tuple[float, float]]) -> None:
    lines, stdout, _counted = run
    assert [line["rate"] for line in lines] == [LOW, HIGH]
    for line in lines:
        assert set(line) >= REAL_KEYS | MORE_KEYS, sorted(REAL_KEYS | MORE_KEYS - set(line))
        assert line["step_seconds"] == STEP_SECONDS
    # One human-readable line per step, as it ends.
    assert [line.split(":")[0] for line in stdout.splitlines() if line.startswith("rate ")] == [
        f"rate {LOW:g}/s",
        f"rate {HIGH:g}/s",
    ]


def test_offered_is_what_the_server_received(
    run: tuple[list[dict[str, Any]], str, tuple[float, float]],
) -> None:
    """The emulator finished (and counted the prompt tokens of) exactly the warm-up and every request
    the steps say they offered; each step's count is a plausible Poisson count at its rate."""
    lines, _stdout, (finished, prompt_tokens) = run
    sent = WARMUP + sum(line["offered"] for line in lines)
    assert finished == sent
    assert prompt_tokens == sent * PROMPT
    for line in lines:
        expected = line["rate"] * STEP_SECONDS
        assert abs(line["offered"] - expected) <= 4 * math.sqrt(expected) + 2, line
        assert line["server_finished"] == line["offered"]  # the server's counters cover the step's requests


def test_low_rate_is_served_with_a_flat_queue(
    run: tuple[list[dict[str, Any]], str, tuple[float, float]],
) -> None:
    low = run[0][0]
    assert low["offered"] > 0
    assert low["ok"] == low["offered"] and low["errors"] == 0
    # Flat: a Poisson burst may queue a request or two for a moment, never a trend (at the
    # overloaded rate the slope is about 8 a second).
    assert abs(low["waiting_slope_per_s"]) < 1.0
    assert abs(low["waiting_slope_whole_per_s"]) < 1.0
    assert low["waiting_mean"] < 0.5 and low["waiting_max"] <= 2
    assert low["client_ttft_p90"] < SLO_TTFT_SECONDS and low["slo_ttft_ok"] is True
    # Every request of an unloaded step ends within about a request's lifetime of the step's end.
    assert low["completed_in_step"] >= low["offered"] - 3


def test_overload_grows_the_queue_and_ttft(
    run: tuple[list[dict[str, Any]], str, tuple[float, float]],
) -> None:
    """Well above the capacity: the queue grows by about `rate - capacity` a second, TTFT grows with it,
    and the server completes no more than its capacity inside the step; the stragglers still finish."""
    low, high = run[0]
    excess = HIGH - capacity()
    assert excess > 5
    assert high["waiting_slope_per_s"] > 0.4 * excess
    assert high["waiting_slope_whole_per_s"] > 0.4 * excess
    assert high["waiting_max"] > 10
    assert high["client_ttft_p90"] > max(5 * low["client_ttft_p90"], 1.0)
    assert high["client_ttft_p99"] >= high["client_ttft_p90"] >= high["client_ttft_p50"]
    assert high["slo_ttft_ok"] is False
    assert high["achieved_rate"] < 1.3 * capacity() < HIGH
    assert high["ok"] == high["offered"] and high["errors"] == 0
    assert high["completed_in_step"] < high["ok"]
    assert high["server_ttft_p90"] > low["server_ttft_p90"]
    assert high["running_mean"] > 0.75 * SLOTS


def test_server_and_client_agree(run: tuple[list[dict[str, Any]], str, tuple[float, float]]) -> None:
    """The server's TPOT (emulated seconds) is the time scale times the client's (real seconds): the
    histogram deltas read the right family for the right model."""
    for line in run[0]:
        assert line["server_tpot_mean"] == pytest.approx(TIME_SCALE * line["client_tpot_p50"], rel=0.3)
        assert line["preemptions"] == 0
        assert 0 < line["kv_usage_mean"] < 1


@pytest.mark.parametrize(("flag", "value"), [("--rates", "30,abc"), ("--step", "60"), ("--slo-ttft", "fast")])
def test_a_bad_flag_exits_2_naming_it(flag: str, value: str, tmp_path: Path) -> None:
    flags = {
        "--url": "http://127.0.0.1:9",
        "--model": "m",
        "--rates": "1",
        "--out": str(tmp_path / "o.jsonl"),
    }
    flags[flag] = value
    done = sweep(*(item for pair in flags.items() for item in pair))
    assert done.returncode == 2, done.stderr
    assert f"argument {flag}" in done.stderr and value in done.stderr, done.stderr
    assert not (tmp_path / "o.jsonl").exists() or (tmp_path / "o.jsonl").read_text() == ""


def test_an_unreachable_server_exits_1(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{procs.free_port()}"
    done = sweep(
        "--url", url, "--model", "m", "--rates", "1", "--step", "2s", "--out", str(tmp_path / "o.jsonl")
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"cannot reach {url}/metrics" in done.stderr


def _script() -> ModuleType:
    """The script as a module (bench/ is no package), for its pure functions."""
    spec = importlib.util.spec_from_file_location("bench_sweep_steps", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered first: its dataclasses look their module up while the class bodies run.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_histogram_quantile_interpolates_as_prometheus_does() -> None:
    """Prometheus's `bucketQuantile`: linear within the bucket the rank falls in, the lowest bucket
    starting at 0, the `+Inf` bucket answered with the highest finite bound, no observations NaN."""
    quantile = _script().histogram_quantile
    buckets = [(0.1, 0.0), (0.5, 10.0), (1.0, 20.0), (math.inf, 20.0)]
    assert quantile(0.5, buckets) == pytest.approx(0.5)  # rank 10 ends the (0.1, 0.5] bucket
    assert quantile(0.75, buckets) == pytest.approx(0.75)  # rank 15: halfway through (0.5, 1.0]
    assert quantile(0.25, buckets) == pytest.approx(0.3)  # rank 5: halfway through (0.1, 0.5]
    tpot = [(0.01, 8.0), (0.025, 10.0), (math.inf, 10.0)]
    assert quantile(0.5, tpot) == pytest.approx(0.01 * 5 / 8)  # the lowest bucket starts at 0
    assert quantile(0.9, tpot) == pytest.approx(0.01 + 0.015 * 1 / 2)  # rank 9: 1 of the bucket's 2
    assert quantile(0.9, [(1.0, 5.0), (math.inf, 10.0)]) == 1.0  # in +Inf: the highest finite bound
    assert quantile(0.9, [(1.0, 0.0), (math.inf, 0.0)]) is None
    assert quantile(0.9, [(1.0, 3.0), (2.0, 3.0)]) is None  # no +Inf bucket


def test_percentiles_treat_a_missing_ttft_as_infinite() -> None:
    script = _script()
    assert script.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.9) == pytest.approx(4.6)  # numpy's linear
    assert script.percentile([1.0, 2.0, 3.0, 4.0, math.inf], 0.5) == 3.0
    assert script.percentile([1.0, 2.0, 3.0, 4.0, math.inf], 0.9) == math.inf
