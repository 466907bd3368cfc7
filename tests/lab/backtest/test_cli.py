"""`vllm-autoscale backtest` on the real capture's stage table: the table, the verdicts, the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapter import cli
from lab.backtest.cli import parse_time
from tests.lab.backtest.tsdb import REAL


def test_the_real_capture_gets_a_verdict_of_each_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real vLLM 0.26.0 run, capacity fitted from it: at least one candidate is supported, one
    rejected and one open, each with its reason; the files are in --out."""
    out = tmp_path / "out"
    assert cli.main(["backtest", "--trace", str(REAL / "load-stages.csv"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "capacity        29" in printed and "growing queue" in printed
    record = json.loads((out / "decision.json").read_text())
    verdicts = [
        c["verdict"] for c in record["candidates"] if c["kind"] == "candidate" or c["verdict"] != "reference"
    ]
    assert {"supported", "rejected", "open"} <= set(verdicts)
    assert all(c["reason"] for c in record["candidates"])
    assert {"estimate", "pessimistic", "optimistic"} == set(record["candidates"][0]["evidence"])
    markdown = (out / "decision.md").read_text()
    assert "## Verdicts" in markdown and "| policy | verdict |" in markdown
    assert (out / "pareto.png").read_bytes().startswith(b"\x89PNG")
    assert len((out / "policies.csv").read_text().splitlines()) == len(record["candidates"]) + 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param([], "give exactly one of --trace FILE and --prometheus-url URL", id="no traffic"),
        pytest.param(["--trace", "missing.csv"], "unable to read trace missing.csv", id="missing trace"),
        pytest.param(
            ["--prometheus-url", "http://127.0.0.1:1"], "--prometheus-url needs --start", id="no start"
        ),
        pytest.param(
            ["--prometheus-url", "http://127.0.0.1:1", "--start", "yesterday"],
            "time 'yesterday' must be",
            id="bad time",
        ),
        pytest.param(
            ["--trace", str(REAL / "load-stages.csv"), "--capacity", "3", "--profile", "p.json"],
            "at most one of --capacity and --profile",
            id="two capacities",
        ),
        pytest.param(
            ["--trace", str(REAL / "load-stages.csv"), "--profile", "missing.json"],
            "unable to read profile missing.json",
            id="missing profile",
        ),
        pytest.param(
            ["--trace", str(REAL / "load-stages.csv"), "--engine-profile", "missing.json"],
            "unable to read profile missing.json",
            id="--engine-profile is --profile",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    assert cli.main(["backtest", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vllm-autoscale backtest: ") and message in err and "\n" not in err


def test_times_are_unix_iso_or_relative_to_now() -> None:
    assert parse_time("1790000000") == 1790000000
    assert parse_time("2026-11-26T10:00:00Z") == 1795687200
    assert parse_time("now-2h", now=10000.0) == 10000.0 - 7200
    with pytest.raises(ValueError, match="must carry a time zone"):
        parse_time("2026-11-26T10:00:00")


def test_a_policy_file_replaces_the_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--policies FILE` with `baselines: false`: exactly its policies are judged."""
    policies = tmp_path / "policies.yaml"
    policies.write_text(
        "policies:\n  - {name: mine, metric: vllm_requests_inflight, "
        "target: 10, max_replicas: 4}\nbaselines: false\n"
    )
    out = tmp_path / "out"
    assert (
        cli.main(
            [
                "backtest",
                "--trace",
                str(REAL / "load-stages.csv"),
                "--policies",
                str(policies),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    record = json.loads((out / "decision.json").read_text())
    assert [c["name"] for c in record["candidates"]] == ["mine"]
    policies.write_text("policies:\n  - {name: mine, metric: vllm_gpu_magic, target: 10}\n")
    assert (
        cli.main(
            [
                "backtest",
                "--trace",
                str(REAL / "load-stages.csv"),
                "--policies",
                str(policies),
                "--out",
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "policy key 'policies[0].metric' value 'vllm_gpu_magic' must be one of" in err and "\n" not in err
