"""Shared fixtures (the real application assembled around
a FakeSource), and the suite spread over xdist workers."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, settings

from adapter.app import create_app
from adapter.config import load
from tests import workers
from tests.fakes import FakeSource

# Hypothesis times each example (a 200 ms deadline) and the generation of its data (the too_slow
# health check): on the 2-core CI runner, with four workers and the engines beside them, both read
# the machine's load, not the code (a too_slow check fired at load 7.6 on a test that runs in 6 s
# alone). Every property is still checked on every example; only the stopwatch is off.
settings.register_profile("loaded-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("loaded-machine")

#: a test client of the real application
Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[tuple[Client, FakeSource]]]


@pytest.fixture(scope="session", autouse=True)
def results_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The results cache (`lab.results_cache`: demo days, twins) in a folder of this run's, never the
    user's, and nothing outlives the run's temporary folders. Under pytest-xdist the workers' folders
    sit in one folder of the run, and the cache goes there: a day or a twin one worker computed, the
    others (and the commands they start) read. Writes are atomic, so two workers that compute the same
    result at once write the same bytes in turn."""
    before = os.environ.get("VLLM_AUTOSCALE_CACHE")
    run = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = run.parent
    os.environ["VLLM_AUTOSCALE_CACHE"] = str(run / "results-cache")
    yield
    if before is None:
        del os.environ["VLLM_AUTOSCALE_CACHE"]
    else:
        os.environ["VLLM_AUTOSCALE_CACHE"] = before


@pytest.fixture
def make_client(aiohttp_client: Any) -> MakeClient:
    """Build the real app (create_app) with a FakeSource and return (client, source)."""

    async def make(config_text: str = "", source: FakeSource | None = None) -> tuple[Client, FakeSource]:
        fake = source or FakeSource()
        app = create_app(load(config_text), source=fake)
        client: Client = await aiohttp_client(app)
        return client, fake

    return make


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's: without it (`-p no:xdist`) nothing asks
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> workers.UnitScheduling | None:
    """`--dist loadfile` hands out the units of tests/workers.py:
    files that share a session fixture go together."""
    return workers.UnitScheduling(config, log) if config.getvalue("dist") == "loadfile" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker the slowest units come first (each worker collects in the same order)."""
    if workers.on_worker(config):
        workers.slowest_first(items)
