"""The suite's CPU by test file: a pytest plugin, and the table it adds up to.

The suite is CPU-bound on the 2-core CI runner, so a test's wall time says little (it waits for its
neighbours); its CPU says what it costs. Each test's CPU is its process's (user + system) plus that of
the child processes it waited for (`resource.getrusage`), added up by file; each pytest-xdist worker
writes its totals to `$PYTEST_CPU_DIR`, and the module, run as a script, prints the table:

    PYTEST_CPU_DIR=/tmp/cpu PYTHONPATH=bench .venv/bin/python -m pytest -q -n 4 --dist loadfile -p pytest_cpu
    .venv/bin/python bench/pytest_cpu.py /tmp/cpu

A daemon a fixture starts and reaps counts towards the test that reaped it.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
from collections.abc import Generator
from pathlib import Path

import pytest

_TOTALS: collections.defaultdict[str, float] = collections.defaultdict(float)


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    before = _cpu_seconds()
    yield
    _TOTALS[item.nodeid.split("::", 1)[0]] += _cpu_seconds() - before


def pytest_sessionfinish(session: pytest.Session) -> None:
    folder = os.environ.get("PYTEST_CPU_DIR")
    if folder and _TOTALS:
        Path(folder).mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (Path(folder) / f"{worker}.json").write_text(json.dumps(dict(_TOTALS)))


def table(folder: Path, rows: int = 25) -> list[str]:
    """The files costing most CPU, with the total, from the workers' files in `folder`."""
    totals: collections.defaultdict[str, float] = collections.defaultdict(float)
    for path in folder.glob("*.json"):
        for name, seconds in json.loads(path.read_text()).items():
            totals[name] += seconds
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:rows]
    lines = [f"{sum(totals.values()):8.1f}  CPU seconds in all"]
    lines += [f"{seconds:8.1f}  {name}" for name, seconds in ranked]
    return lines


if __name__ == "__main__":
    print("\n".join(table(Path(sys.argv[1]))))
