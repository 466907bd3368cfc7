"""How the suite is spread over pytest-xdist workers (`make test`: `-n 4 --dist loadfile`).

A unit of work is a test file, as `--dist loadfile` makes it, so a module-scoped fixture (a real
Prometheus, an emulator fleet) is built once; files that share a session-scoped fixture are one unit
(`SHARED`), so that fixture is built once too. Units are handed out in collection order
(`--no-loadscope-reorder`) with the slowest moved to the front, so the longest units (the emulator
profiles: about a minute and a quarter of CPU) start at once while the others take the rest of the
suite around them. Four workers on the 2-core CI runner: a worker waiting on a real process (a
Prometheus, the rehearsal's days on the wall clock) leaves its core to the other three.

Every worker runs at the same priority: the profiles run on virtual time (`lab.virtual_time`), where
a busy machine makes a run slower, not different, so nothing has to step back for them.
"""

from __future__ import annotations

from typing import Final

import pytest
from xdist.scheduler import LoadFileScheduling

#: the slowest units, slowest first (docs/test-durations.md); every other unit follows in collection order
SLOW_FIRST: Final = (
    "tests/integration/test_profile_emulators.py",
    "tests/integration/test_profile_launch.py",
    "the default demo",
    "tests/integration/test_experiments_emulators.py",
    "tests/integration/test_rehearsal_band.py",
    "tests/helm/",
    "tests/integration/test_keda_scrape.py",
    "tests/lab/demo/test_cli.py",
    "tests/lab/backtest/test_reference_traces.py",
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
    "tests/integration/test_demo_default.py": "the default demo",  # `default_demo` (the same)
    "tests/integration/test_readme_targets.py": "the default demo",
}


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
