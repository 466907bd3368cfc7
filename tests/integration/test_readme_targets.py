"""README "Choosing a metric and a target": its table is what the commands print.

The demo runs on virtual time, so a command gives the same figures on any machine; this test runs the
default row (the headline: in-flight AverageValue 12, the default profile) as a real process and
compares every column at the table's precision, and checks that every row's command is one the demo
accepts. The other rows cost the same 80-100 s of CPU each and are left to the reader to rerun.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from adapter.cli import build_parser
from lab.demo.report import SUMMARY_NAME

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
_ROW = re.compile(
    r"^\| `(vllm-autoscale demo[^`]*)` \| ([\d.]+) % \| ([\d.]+) (s|ms) \| ([\d.]+) \| (\d+) \|$"
)
_CHECKED_ROW = "vllm-autoscale demo --target 12"
_TIMEOUT_SECONDS = 400


def _rows() -> dict[str, tuple[str, ...]]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Choosing a metric and a target") :]
    section = section[: section.index("\n## ", 1)]
    return {m.group(1): m.groups()[1:] for line in section.splitlines() if (m := _ROW.match(line))}


def test_every_row_is_a_command_the_demo_takes() -> None:
    rows = _rows()
    assert len(rows) == 5 and _CHECKED_ROW in rows
    for command in rows:
        args = build_parser("demo").parse_args(shlex.split(command)[1:])
        assert args.command == "demo"


def test_the_default_row_is_what_the_demo_prints(tmp_path: Path) -> None:
    slo, ttft, unit, replica_minutes, peak_queue = _rows()[_CHECKED_ROW]
    out = tmp_path / "out"
    command = [sys.executable, "-m", "adapter", *shlex.split(_CHECKED_ROW)[1:], "--plain", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT_SECONDS, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / SUMMARY_NAME).read_text())["summary"]
    assert f"{100 * summary['slo_attainment']:.1f}" == slo
    seconds = summary["ttft_p90"]
    assert (f"{seconds:.1f}" if unit == "s" else f"{1000 * seconds:.0f}") == ttft
    assert f"{summary['replica_minutes']:.1f}" == replica_minutes
    assert str(summary["peak_queue"]) == peak_queue
