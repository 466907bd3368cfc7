"""Both pools' signals of an emulated P/D pair through the real adapter, on the scrape and Prometheus sources.

An in-process `DisaggregatedFleet` (two prefill and two decode servers, lab.emulator.pd.fleet)
runs a timeline that holds each signal still for tens of seconds, so the adapter's value can be
compared exactly with what the pods' own `/metrics` say at the same moment:

* two short requests (10 prompt tokens) prefill in a step, so the prefill pool's mean computed
  prompt is 10 tokens; their KV then takes `TRANSFER` seconds to reach the decode servers
  (`vllm:num_requests_kv_fetch_by_stage{stage="in_progress"}` = 2), after which they decode for
  tens of seconds (2 running on the decode pool);
* four long requests (1,200 tokens, 60 s of prefill each, one batch slot per server) keep one running
  and one waiting on each prefill server: the backlog is (2 + 2) x 10 / (20 tokens/s x 2 pods) = 1 s.

The adapter (`make_source` + `make_provider`, as `serve` builds them) reads the scrape source from
static targets carrying the role label, and a real Prometheus whose scrape config adds
`llm_d_ai_role` as a PodMonitor's relabeling would. Bad input through the same stack: a selector
naming the other pool (400), a role value no pod has, a fleet with one role only and a pool whose
pods report no KV transfer (503 each, with the precise line).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapter.app import started_provider
from adapter.config import load_file
from adapter.errors import AdapterError, ConnectorNotReported, NoRoleTargets, RoleConflict
from adapter.provider import CachedProvider
from adapter.sources.page_parser import Parser
from adapter.vocabulary import vllm
from adapter.vocabulary.selectors import parse
from lab import virtual_time
from lab.emulator.params import EngineParams
from lab.emulator.pd.fleet import DisaggregatedFleet, RoleReplica
from tests.integration import procs
from tests.waiting import eventually

pytestmark = pytest.mark.integration

NAMESPACE = "ml"
THROUGHPUT = 20.0  # prompt tokens per second: 1 / step_per_prefill_token_seconds
TRANSFER = 20.0
SHORT, LONG = 10, 1200
BACKLOG = "vllm_prefill_backlog_seconds"
LLAMA = parse("model_name=llama")
DECODE = parse("model_name=llama,llm-d.ai/role=decode")
# One slot per server; a prompt prefills 16 tokens a step at 50 ms a token (20 tokens/s),
# decodes 10 ms a token.
PARAMS = EngineParams(
    max_num_seqs=1,
    max_num_batched_tokens=16,
    step_base_seconds=0.01,
    step_per_seq_seconds=0.0,
    step_per_prefill_token_seconds=0.05,
    step_jitter=0.0,
    frontend_seconds=0.0,
    max_model_len=4096,
)
_PARSER = Parser()
_PARSER.want(
    [
        *vllm.NUM_REQUESTS_RUNNING,
        *vllm.KV_CACHE_USAGE,
        *vllm.KV_FETCH_BY_STAGE,
        *vllm.WAITING_BY_REASON,
        f"{vllm.PREFILL_COMPUTED_TOKENS[0]}_sum",
        f"{vllm.PREFILL_COMPUTED_TOKENS[0]}_count",
    ]
)


@contextlib.asynccontextmanager
async def pd_fleet() -> AsyncIterator[DisaggregatedFleet]:
    """Two prefill and two decode servers on the running loop's clock, idle until `timeline`."""
    fleet = DisaggregatedFleet(
        model="llama", params=PARAMS, transfer_seconds=TRANSFER, seed=4, monotonic=virtual_time.loop_time
    )
    async with fleet:
        await fleet.start(2, 2)
        await fleet.wait_ready()
        yield fleet


@contextlib.asynccontextmanager
async def timeline(fleet: DisaggregatedFleet, provider: CachedProvider) -> AsyncIterator[None]:
    """The module's timeline, begun once the adapter reads the idle pool (so every rate it needs sees
    the histograms at zero first): the short requests, then the long ones."""
    idle = await eventually(lambda: _served(provider, BACKLOG, LLAMA), 30, "the idle pool's backlog")
    assert idle == (0.0,), "an idle pool holds no backlog, whatever its prompt sizes"
    decode = fleet.replicas["decode"]
    tasks = [
        asyncio.create_task(decode[i % 2].runner.complete(SHORT, 3000, ignore_eos=True)) for i in range(2)
    ]
    try:
        await eventually(_prefilled(fleet, 2), 10, "the short requests' prefill")
        tasks += [
            asyncio.create_task(decode[i % 2].runner.complete(LONG, 10, ignore_eos=True)) for i in range(4)
        ]
        # Each reaches its prefill server a few loop turns later (decode server, sidecar, prefill server):
        # until all four are there, the pages and the adapter can agree on a backlog still forming
        # (a fresh clone read 0.5 s with two of them queued and none running yet).
        await eventually(_held(fleet, 4), 10, "the long requests held by the prefill pool")
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _held(fleet: DisaggregatedFleet, count: int) -> Callable[[], Any]:
    async def check() -> bool:
        engines = [r.engine for r in fleet.replicas["prefill"]]
        return sum(len(e.running) + len(e.waiting) for e in engines) >= count

    return check


async def _served(provider: CachedProvider, metric: str, selector: Any) -> tuple[float] | None:
    try:
        return ((await provider.get(metric, NAMESPACE, selector)).value,)
    except AdapterError:
        return None


def _prefilled(fleet: DisaggregatedFleet, count: int) -> Callable[[], Any]:
    async def check() -> bool:
        return sum(r.engine.stats.request_success["length"] for r in fleet.replicas["prefill"]) >= count

    return check


async def pages(fleet: DisaggregatedFleet, role: str) -> list[dict[str, dict[Any, float]]]:
    """The parsed `/metrics` of the role's servers, read over HTTP as a scraper reads them."""
    replicas: list[RoleReplica] = fleet.replicas[role]  # type: ignore[index]
    async with aiohttp.ClientSession() as session:
        texts = [await (await session.get(r.metrics_url)).text() for r in replicas]
    return [_PARSER.parse(text) for text in texts]


def total(pages: list[dict[str, dict[Any, float]]], name: str, **fixed: str) -> float:
    return sum(
        v for page in pages for labels, v in page.get(name, {}).items() if set(fixed.items()) <= set(labels)
    )


async def expected(fleet: DisaggregatedFleet) -> dict[str, float]:
    """Each signal as the pods' pages say it (every request of the run lies inside the 2 m window)."""
    prefill, decode = await pages(fleet, "prefill"), await pages(fleet, "decode")
    computed = vllm.PREFILL_COMPUTED_TOKENS[0]
    held = total(prefill, vllm.NUM_REQUESTS_RUNNING[0]) + total(
        prefill, vllm.WAITING_BY_REASON[0], reason="capacity"
    )
    mean = total(prefill, f"{computed}_sum") / total(prefill, f"{computed}_count")
    kv = [v for page in decode for v in page[vllm.KV_CACHE_USAGE[0]].values()]
    return {
        BACKLOG: held * mean / (THROUGHPUT * len(prefill)),
        "vllm_requests_running": total(decode, vllm.NUM_REQUESTS_RUNNING[0]),
        "vllm_kv_fetch_requests": total(decode, vllm.KV_FETCH_BY_STAGE[0]),
        "vllm_kv_cache_usage": sum(kv) / len(kv),
        "all_running": total(prefill + decode, vllm.NUM_REQUESTS_RUNNING[0]),
    }


def _targets(
    fleet: DisaggregatedFleet, roles: tuple[str, ...] = ("prefill", "decode")
) -> list[dict[str, Any]]:
    return [{"url": r.metrics_url, "labels": {"llm-d.ai/role": r.role}} for r in fleet.all if r.role in roles]


@contextlib.asynccontextmanager
async def adapter(settings: dict[str, Any]) -> AsyncIterator[CachedProvider]:
    """The adapter's provider over the source `settings` configure, as `serve` assembles it, on the
    running loop's clock."""
    base = {"metrics": {BACKLOG: {"prefill_throughput": THROUGHPUT}}, "scrape.namespace": NAMESPACE}
    config = load_file(None, {**base, **settings})
    async with started_provider(config, clock=virtual_time.loop_clock()) as provider:
        yield provider


async def agrees(
    provider: CachedProvider, fleet: DisaggregatedFleet, metric: str, tolerance: float = 1e-3
) -> float:
    """Poll until the adapter's value for `metric` equals what the pages say around it; return it."""
    selector = LLAMA if metric == BACKLOG else DECODE

    async def check() -> float | None:
        before = (await expected(fleet))[metric]
        value = (await provider.get(metric, NAMESPACE, selector)).value
        after = (await expected(fleet))[metric]
        close = before == pytest.approx(after, abs=tolerance) and value == pytest.approx(after, abs=tolerance)
        return value if close else None

    return await eventually(check, 30, f"{metric} equal to the pods' pages")


async def check_both_pools(provider: CachedProvider, fleet: DisaggregatedFleet) -> None:
    backlog = await agrees(provider, fleet, BACKLOG)
    assert backlog == pytest.approx(4 * SHORT / (THROUGHPUT * 2), abs=1e-3)  # 1 s, the timeline's
    fetching = await agrees(provider, fleet, "vllm_kv_fetch_requests")
    assert fetching == 2  # both short requests' KV in flight
    running = await agrees(provider, fleet, "vllm_requests_running")
    assert running == 2 and (await expected(fleet))["all_running"] == 4  # the prefill pool's 2 are not read
    await agrees(provider, fleet, "vllm_kv_cache_usage", tolerance=0.005)


async def refused(provider: CachedProvider, metric: str, selector: str = "model_name=llama") -> AdapterError:
    try:
        value = await provider.get(metric, NAMESPACE, parse(selector))
    except AdapterError as error:
        return error
    raise AssertionError(f"{metric} served {value} where it must refuse")


def test_both_pools_through_the_scrape_source_and_bad_input() -> None:
    """On virtual time (`lab.virtual_time`): the fleet, the scrape source and the questions share one
    loop, so the timeline's tens of seconds take none of the machine's, and a loaded machine cannot
    delay a page past the scrape timeout."""
    virtual_time.run(_scrape_source_and_bad_input())


async def _scrape_source_and_bad_input() -> None:
    async with pd_fleet() as fleet:
        scrape = {"source": "scrape", "scrape.interval": 1.0, "scrape.timeout": 0.8}
        async with (
            adapter({**scrape, "scrape.targets": _targets(fleet)}) as provider,
            timeline(fleet, provider),
        ):
            await check_both_pools(provider, fleet)
            conflict = await refused(provider, BACKLOG, "model_name=llama,llm-d.ai/role=decode")
            assert isinstance(conflict, RoleConflict) and conflict.status(BACKLOG)["code"] == 400
        async with adapter(
            {**scrape, "scrape.targets": _targets(fleet), "roles": {"prefill": "prefiller"}}
        ) as typo:
            missing = await refused(typo, BACKLOG)
            assert isinstance(missing, NoRoleTargets)
            assert missing.status(BACKLOG)["message"] == (
                f"unable to fetch external metric {BACKLOG!r}: "
                "no pod labelled llm-d.ai/role=prefiller matches "
                "the namespace and selector"
            )
        async with adapter({**scrape, "scrape.targets": _targets(fleet, ("decode",))}) as decode_only:
            assert isinstance(await refused(decode_only, BACKLOG), NoRoleTargets)
            assert (await decode_only.get("vllm_kv_fetch_requests", NAMESPACE, LLAMA)).value >= 0
        swapped = {"prefill": "decode", "decode": "prefill"}  # the decode metric on pods that are no consumer
        async with adapter({**scrape, "scrape.targets": _targets(fleet), "roles": swapped}) as wrong:
            error = await refused(wrong, "vllm_kv_fetch_requests")
            assert isinstance(error, ConnectorNotReported)
            assert "vllm:num_requests_kv_fetch_by_stage absent on" in str(error)


async def test_both_pools_through_a_real_prometheus(tmp_path: Path) -> None:
    """On the wall clock: Prometheus scrapes on its own."""
    async with pd_fleet() as fleet:
        jobs = [
            {
                "job_name": f"vllm-{role}",
                "static_configs": [
                    {
                        "targets": [
                            r.metrics_url.removeprefix("http://").removesuffix("/metrics")
                            for r in fleet.replicas[role]
                        ],
                        # what a PodMonitor's relabeling writes:
                        # the pod's namespace and its llm-d.ai/role label
                        "labels": {"namespace": NAMESPACE, "llm_d_ai_role": role},
                    }
                ],
            }
            for role in ("prefill", "decode")
        ]
        with procs.prometheus(tmp_path / "prometheus", jobs) as prometheus:
            settings = {
                "source": "prometheus",
                "prometheus.url": prometheus.url,
                "prometheus.refresh_interval": 1.0,
            }
            async with adapter(settings) as provider, timeline(fleet, provider):
                await check_both_pools(provider, fleet)
                conflict = await refused(provider, BACKLOG, "llm-d.ai/role in (decode)")
                assert isinstance(conflict, RoleConflict)
            async with adapter({**settings, "roles": {"label": "app.example.com/pool"}}) as unlabelled:
                missing = await refused(unlabelled, BACKLOG)
                assert isinstance(missing, NoRoleTargets) and "app.example.com/pool=prefill" in str(missing)
            async with adapter({**settings, "roles": {"prefill": "decode", "decode": "prefill"}}) as wrong:
                assert isinstance(await refused(wrong, "vllm_kv_fetch_requests"), ConnectorNotReported)
