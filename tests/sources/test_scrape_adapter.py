"""The scrape source inside the adapter: the application serves scraped values, the flags set the
targets, and `vllm-autoscale query` reads the pods. The pods are real HTTP servers on loopback
(tests/sources/scrape_fleet.py).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from adapter import cli
from adapter.app import create_app
from adapter.clock import Clock
from adapter.config import load_file
from adapter.flags import overrides, serve_overrides
from tests.conftest import Client
from tests.sources.scrape_fleet import INTERVAL, TIMEOUT, Fleet
from tests.vllm_pages import PodLoad
from tests.waiting import eventually

#: pytest-aiohttp's `aiohttp_client`: a test client of an application served on loopback
ServeClient = Callable[[web.Application], Awaitable[Client]]


async def test_the_adapter_serves_scraped_values(fleet: Fleet, aiohttp_client: ServeClient) -> None:
    """The real app on the scrape source: ready once a round completed, and the HPA's request
    gets one item with the summed value."""
    a, b = (
        fleet.add("a", PodLoad("llama", running=3, waiting=2)),
        fleet.add("b", PodLoad("llama", running=5, waiting=1)),
    )
    config = load_file(
        None,
        {
            "source": "scrape",
            "scrape.targets": [a, b],
            "scrape.namespace": "ml",
            "scrape.interval": INTERVAL,
            "scrape.timeout": TIMEOUT,
        },
    )
    http = await aiohttp_client(create_app(config))

    async def ready() -> bool:
        return (await http.get("/readyz")).status == 200

    await eventually(ready, 5.0, "the adapter to become ready", interval=0.05)
    response = await http.get("/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/vllm_requests_inflight")
    assert response.status == 200
    assert [item["value"] for item in (await response.json())["items"]] == ["11"]


def test_scrape_flags_override_the_config() -> None:
    """`--scrape-target` (repeatable) and `--scrape-namespace` map to scrape.targets/namespace."""
    for command in (["serve", "--insecure-serving"], ["query", "vllm_requests_waiting"]):
        args = cli.build_parser().parse_args(
            [
                *command,
                "--source",
                "scrape",
                "--scrape-target",
                "http://10.0.0.1:8000",
                "--scrape-target",
                "http://10.0.0.2:8000/metrics",
                "--scrape-namespace",
                "ml",
            ]
        )
        chosen = serve_overrides(args) if command[0] == "serve" else overrides(args)
        config = load_file(None, chosen)
        assert config.scrape.targets == ("http://10.0.0.1:8000", "http://10.0.0.2:8000/metrics")
        assert config.scrape.namespace == "ml"


async def test_query_command_reads_pods(fleet: Fleet) -> None:
    """`vllm-autoscale query` on the scrape source prints the HPA's answer from the pods."""
    url = fleet.add("a", PodLoad("llama", waiting=4))
    config = load_file(None, {"source": "scrape", "scrape.targets": [url], "scrape.namespace": "ml"})
    report = await cli.query_once(config, "vllm_requests_waiting", "ml", "")
    assert report["response"]["items"][0]["value"] == "4"
    assert report["query"].startswith("scrape:   1 targets in namespace 'ml'")


async def test_the_app_dates_scraped_values_on_the_clock_it_is_given(
    fleet: Fleet, aiohttp_client: ServeClient
) -> None:
    """`create_app(clock=...)` without a source builds its scrape source on that clock too: a wall
    clock ten days behind the system's dates the served item ten days back (the value cache and the
    source once read different clocks, and the item carried the system's time)."""
    behind = 10 * 86_400.0
    url = fleet.add("a", PodLoad("llama", waiting=4))
    config = load_file(
        None,
        {
            "source": "scrape",
            "scrape.targets": [url],
            "scrape.namespace": "ml",
            "scrape.interval": INTERVAL,
            "scrape.timeout": TIMEOUT,
        },
    )
    clock = Clock(wall=lambda: time.time() - behind)
    http = await aiohttp_client(create_app(config, clock=clock))

    async def item() -> dict[str, str] | None:
        response = await http.get("/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/vllm_requests_waiting")
        return (await response.json())["items"][0] if response.status == 200 else None

    served = await eventually(item, 5.0, "a scraped value", interval=0.05)
    assert served["value"] == "4"
    dated = datetime.datetime.fromisoformat(served["timestamp"].replace("Z", "+00:00")).timestamp()
    assert abs(dated - clock.wall()) < 5 * INTERVAL, (served, clock.wall())
