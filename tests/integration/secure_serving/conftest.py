"""Fixtures of the secure serving tests: a cluster (PKI and fake kube-apiserver), its users, and
adapters started in-process with `serve` flags (tests/integration/secure_serving/harness.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapter import cli, server
from adapter.config import load_file
from adapter.flags import serve_overrides
from tests.certs import CA
from tests.fakes import FakeSource
from tests.integration.secure_serving.harness import (
    DEADLINE_SECONDS,
    HPA_USER,
    METRIC,
    Adapter,
    Cluster,
    StartAdapter,
)
from tests.kubeapi_fake import FakeKubeAPI, Grant


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    kube = FakeKubeAPI(CA("kube-apiserver-ca"))
    kubeconfig = await kube.start(tmp_path)
    try:
        yield Cluster(tmp_path, kube, kubeconfig)
    finally:
        await kube.stop()


@pytest.fixture
async def start_adapter(cluster: Cluster) -> AsyncIterator[StartAdapter]:
    """Start adapters with `serve` flags; each is stopped (and its task awaited) in teardown."""
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(*flags: str, config_text: str = "", defaults: bool = True) -> Adapter:
        files = cluster.files()
        argv = ["serve", "--address", "127.0.0.1", "--kubeconfig", str(cluster.kubeconfig)]
        if defaults:
            argv += [
                "--tls-cert-file",
                str(files["cert"]),
                "--tls-private-key-file",
                str(files["key"]),
                "--client-ca-file",
                str(files["client_ca"]),
                "--requestheader-client-ca-file",
                str(files["front_proxy_ca"]),
                "--requestheader-allowed-names",
                "front-proxy-client",
            ]
        if config_text:
            config_file = cluster.directory / "config.yaml"
            config_file.write_text(config_text)
            argv += ["--config", str(config_file)]
        args = cli.build_parser().parse_args([*argv, *flags])
        config = load_file(args.config, serve_overrides(args))
        # Port 0 (a free port, never a fixed one) is for tests only, so the config file cannot say it.
        config = dataclasses.replace(config, server=dataclasses.replace(config.server, port=0))
        stop = asyncio.Event()
        bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            server.serve_config(config, stop, source=FakeSource(), on_bound=bound.set_result)
        )
        running.append((stop, task))
        waiting: set[asyncio.Future[Any]] = {bound, task}
        await asyncio.wait(waiting, timeout=DEADLINE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # raises the start-up error
        return Adapter(bound.result(), cluster.serving_ca)

    yield start
    for stop, task in running:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, DEADLINE_SECONDS)


@pytest.fixture
def grants(cluster: Cluster) -> FakeKubeAPI:
    """The cluster's users: the HPA everywhere, alice and bob in namespace `a` only."""
    kube = cluster.kube
    kube.tokens["bob-token"] = {"username": "bob", "groups": ["system:authenticated"]}
    kube.grants += [
        Grant(HPA_USER, verbs=("get", "list"), resources=("*",)),
        Grant("alice", resources=(METRIC,), namespaces=("a",)),
        Grant("bob", resources=(METRIC,), namespaces=("a",)),
    ]
    return kube
