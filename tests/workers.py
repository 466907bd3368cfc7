"""How the suite is spread over pytest-xdist workers (`make test`: `-n 3 --dist loadfile`).

A unit of work is a test file, as `--dist loadfile` makes it, so a module-scoped fixture (a real
Prometheus, an emulator fleet) is built once; files that share a session-scoped fixture are one unit
(`SHARED`), so that fixture is built once too. Units are handed out in collection order
(`--no-loadscope-reorder`) with the slowest moved to the front, so the emulator profiles (five
minutes against the wall clock) start at once on one worker while the others take the rest of the
suite around them.

The profiles measure a server's capacity in real time, and CI has 2 cores: a worker lowers its own
priority before its first test of any other unit, so those tests (and the processes they start)
take the CPU the profiles leave. Nothing of this applies to a run without `-n`.
"""

from __future__ import annotations

import os
from typing import Final

import pytest
from xdist.scheduler import LoadFileScheduling

#: the slowest units, slowest first (docs/test-durations.md); every other unit follows in collection order
SLOW_FIRST: Final = (
    "tests/integration/test_profile_emulators.py",
    "tests/integration/test_readme_targets.py",
    "tests/integration/test_experiments_emulators.py",
    "tests/helm/",
    "tests/integration/test_keda_scrape.py",
    "tests/lab/demo/test_cli.py",
    "tests/integration/test_prometheus_freshness.py",
    "tests/integration/test_keda_prometheus.py",
    "smoke demo",
    "tests/integration/test_scrape_replicas.py",
    "tests/integration/test_alerting_e2e.py",
    "tests/integration/test_sweep_steps.py",
)
#: files (or directories, ending in "/") whose tests share a session-scoped fixture, by unit
SHARED: Final = {
    "tests/helm/": "tests/helm/",  # `rendered` and `self_signed` (tests/helm/conftest.py)
    "tests/integration/test_demo_smoke.py": "smoke demo",  # `smoke_demo` (tests/integration/conftest.py)
    "tests/integration/test_backtest_validation.py": "smoke demo",
}
#: units whose assertions depend on getting the CPU when they ask for it
REAL_TIME: Final = frozenset({"tests/integration/test_profile_emulators.py"})
#: how far the rest of the suite steps back: at niceness 5 a busy process gets about a third of the
#: CPU a normal one does when both want it, and all of it while the profiles wait
NICENESS: Final = 5


def unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or the name its file shares (`SHARED`)."""
    path = nodeid.split("::", 1)[0]
    for prefix, name in SHARED.items():
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return name
    return path


class UnitScheduling(LoadFileScheduling):  # type: ignore[misc]  # xdist ships no type information
    """`--dist loadfile` with the units above: a file, or the files that share a session fixture."""

    def _split_scope(self, nodeid: str) -> str:
        return unit(nodeid)


def on_worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker (the controller collects nothing and runs nothing)."""
    return hasattr(config, "workerinput")


def slowest_first(items: list[pytest.Item]) -> None:
    """Move the slowest units to the front; the sort is stable, so each unit keeps its own order."""
    rank = {name: index for index, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(unit(item.nodeid), len(SLOW_FIRST)))


class Priority:
    """A worker's priority: normal while it runs real-time units, lowered for good after that."""

    def __init__(self) -> None:
        self.lowered = False

    def before(self, item: pytest.Item) -> None:
        """Lower this process's priority before its first test outside the real-time units (it cannot
        be raised again, so those units must come first: `SLOW_FIRST` puts them there)."""
        if not self.lowered and unit(item.nodeid) not in REAL_TIME:
            os.nice(NICENESS)
            self.lowered = True
