"""A real Prometheus scrapes `vllm-autoscale emulate` processes and answers every catalogue query.

Two real emulator processes (the CLI, as a user runs it): two replicas emitting vLLM 0.33's names in namespace
`default`, one emitting the pre-rename 0.10 names in namespace `legacy` (the namespace is a target label of
the scrape config, as a ServiceMonitor would add it). The test sends completions over HTTP to all three while
Prometheus (scrape interval 1 s) collects them, then asks
`adapter.vocabulary.promql.catalogue.value_query(metric, ['namespace="<ns>"'])` for every built-in metric of
the catalogue in both namespaces: each must come back as one finite value, so the catalogue's queries, aliases
included, work on what the emulator exposes.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapter.vocabulary.catalogue import BUILTIN
from adapter.vocabulary.promql.catalogue import value_query
from lab.engine.placement import free_port_range
from tests.integration import procs
from tests.waiting import eventually

pytestmark = pytest.mark.integration

DEPLOYMENTS = (("default", "0.33", 2), ("legacy", "0.10", 1))


@contextlib.contextmanager
def emulator(workdir: Path, version: str, replicas: int) -> Iterator[list[str]]:
    """`python -m adapter emulate` on consecutive free ports; yields the replica addresses once each
    answers /health, and stops the process (SIGTERM, then SIGKILL) on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    for _attempt in range(3):
        base = free_port_range(replicas)
        addresses = [f"127.0.0.1:{base + i}" for i in range(replicas)]
        log = (workdir / "emulate.log").open("wb")
        command = [
            sys.executable,
            "-m",
            "adapter",
            "emulate",
            "--replicas",
            str(replicas),
            "--base-port",
            str(base),
            "--model",
            "llama",
            "--vllm-version",
            version,
            "--seed",
            "3",
        ]
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            state = _wait_listening(process, addresses, workdir / "emulate.log")
            if state == "port taken":
                continue  # another test took a port between the probe and the bind
            yield addresses
            return
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=5)
            log.close()
    raise AssertionError("unable to start the emulator: its ports kept being taken")


def _wait_listening(
    process: subprocess.Popen[bytes], addresses: list[str], log: Path, timeout: float = 60
) -> str:
    """Poll until every address answers /health 200; "port taken" if the process could not bind."""

    def state() -> str | None:
        if process.poll() is not None:
            return "port taken" if "unable to bind" in log.read_text(errors="replace") else "exited"
        if all(procs.http_get(f"http://{a}/health", timeout=1)[0] == 200 for a in addresses):
            return "ready"
        return None

    seen = procs.wait_for(state, timeout, what=f"emulator on {addresses} ready: {log}")
    if seen == "exited":
        raise AssertionError(
            f"emulator exited with {process.returncode}: {log.read_text(errors='replace')[-2000:]}"
        )
    return seen


async def _load(addresses: list[str], stop: asyncio.Event) -> dict[str, int]:
    """Two closed-loop clients per replica sending completions until `stop`; successes per replica."""
    served = dict.fromkeys(addresses, 0)
    rng = random.Random(1)

    async def client(address: str, session: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            body = {
                "model": "llama",
                "prompt": [rng.randrange(32000) for _ in range(300)],
                "max_tokens": 24,
                "ignore_eos": True,
            }
            async with session.post(f"http://{address}/v1/completions", json=body) as response:
                assert response.status == 200, await response.text()
                served[address] += 1

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(client(address, session) for address in addresses for _ in range(2)))
    return served


def _values(url: str) -> dict[tuple[str, str], Any]:
    """Every catalogue metric in every namespace: one finite float each, or what came back instead."""
    answers: dict[tuple[str, str], Any] = {}
    for namespace, _version, _replicas in DEPLOYMENTS:
        for metric in BUILTIN:
            result = procs.prometheus_query(url, value_query(metric, [f'namespace="{namespace}"']))
            values = [float(r["value"][1]) for r in result]
            answers[(metric.name, namespace)] = (
                values[0] if len(values) == 1 and math.isfinite(values[0]) else result
            )
    return answers


async def test_prometheus_answers_every_catalogue_query_on_emulated_replicas(tmp_path: Path) -> None:
    """Prometheus scrapes three emulated replicas (two naming generations) and every built-in
    metric's PromQL returns exactly one finite value per namespace."""
    with contextlib.ExitStack() as stack:
        targets = {
            namespace: stack.enter_context(emulator(tmp_path / namespace, version, replicas))
            for namespace, version, replicas in DEPLOYMENTS
        }
        scrape_configs = [
            {
                "job_name": f"vllm-{namespace}",
                "scrape_interval": "1s",
                "metrics_path": "/metrics",
                "static_configs": [{"targets": addresses, "labels": {"namespace": namespace}}],
            }
            for namespace, addresses in targets.items()
        ]
        prometheus = await asyncio.to_thread(
            stack.enter_context, procs.prometheus(tmp_path / "prometheus", scrape_configs)
        )

        stop = asyncio.Event()
        load = asyncio.create_task(_load([a for addresses in targets.values() for a in addresses], stop))
        answers: dict[tuple[str, str], Any] = {}

        async def finite() -> bool:
            nonlocal answers
            answers = await asyncio.to_thread(_values, prometheus.url)
            return all(isinstance(v, float) for v in answers.values())

        try:
            await eventually(finite, within=90, what="one finite value per query", interval=1)
        except AssertionError:
            missing = {k: v for k, v in answers.items() if not isinstance(v, float)}
            raise AssertionError(f"queries without one finite value: {missing}; load: {load}") from None
        finally:
            stop.set()
            served = await load
        assert all(count > 0 for count in served.values()), served

        up = await asyncio.to_thread(procs.prometheus_query, prometheus.url, "up")
        assert sorted(float(r["value"][1]) for r in up) == [1.0, 1.0, 1.0]
        running = await asyncio.to_thread(
            procs.prometheus_query, prometheus.url, "count by (namespace) (vllm:num_requests_running)"
        )
        assert {r["metric"]["namespace"]: float(r["value"][1]) for r in running} == {
            "default": 2.0,
            "legacy": 1.0,
        }
        legacy = await asyncio.to_thread(
            procs.prometheus_query, prometheus.url, 'count(vllm:gpu_cache_usage_perc{namespace="legacy"})'
        )
        assert float(legacy[0]["value"][1]) == 1.0, "the legacy replica is read through the alias"
        for metric in BUILTIN:
            assert answers[(metric.name, "default")] >= 0
        assert answers[("vllm_ttft_seconds", "default")] > 0
        assert answers[("vllm_tpot_seconds", "legacy")] > 0
