"""Fixtures shared by integration tests: one smoke `demo` run and one default `demo` run, each read by
several test files (`tests/workers.py` keeps the files that share one on one worker)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# The smoke profile runs on virtual time: what it costs is CPU (about 20 s on one core), not its
# 350 emulated seconds.
_DEMO_TIMEOUT_SECONDS = 180
# The default demo also backtests its day when the run's cache is cold; a guard against a hang.
_DEFAULT_DEMO_TIMEOUT_SECONDS = 300


def run_demo(out: Path, *flags: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`vllm-autoscale demo --plain --out out *flags` as a real process; fails the test if it fails."""
    command = [sys.executable, "-m", "adapter", "demo", "--plain", "--out", str(out), *flags]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def run_smoke_demo(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`vllm-autoscale demo --profile smoke` as a real
    process writing to `out`; fails the test if it fails."""
    return run_demo(out, "--profile", "smoke", *extra, timeout=_DEMO_TIMEOUT_SECONDS)


@pytest.fixture(scope="session")
def smoke_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One smoke demo run (seed 0): its output directory and what it printed."""
    out = tmp_path_factory.mktemp("smoke-demo")
    return out, run_smoke_demo(out).stdout


@pytest.fixture(scope="session")
def default_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`vllm-autoscale demo` with its defaults as a real process, as a newcomer runs it (`make demo`):
    its output directory and what it printed. test_demo_default reads it, and test_readme_targets
    reads it as its table's first row (the same command)."""
    out = tmp_path_factory.mktemp("default-demo")
    return out, run_demo(out, timeout=_DEFAULT_DEMO_TIMEOUT_SECONDS).stdout


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration/ carries the
    `integration` marker, so `-m integration` selects them all."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.integration)
