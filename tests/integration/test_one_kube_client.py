"""Authentication and EndpointSlice discovery reach the kube-apiserver through one client.

The adapter runs in-process through `server.serve_config` (flags parsed by the real parser) with
the scrape source discovering pods from EndpointSlices, and `--kubeconfig` pointing at
`tests.kubeapi_fake.FakeKubeAPI`: a stand-in for the kube-apiserver, over TLS, because a real one
cannot run on this machine. The pod is a real HTTP server on loopback serving a vLLM page. Every
call the fake answers must carry the kubeconfig's own token (it answers 401 otherwise), so a call
that reached it came through the kubeconfig; the `kubernetes` library's global default
configuration, which the old discovery loaded into, must never be set.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes import client

from adapter import cli, server
from adapter.config import load_file
from adapter.errors import ConfigError
from adapter.flags import serve_overrides
from tests.certs import CA
from tests.kubeapi_fake import FakeKubeAPI, Grant
from tests.vllm_pages import PodLoad, pod_app

PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/vllm_requests_waiting"
HPA = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
# Generous for a loaded CI machine; every wait returns as soon as it can.
DEADLINE_SECONDS = 10.0


@pytest.fixture
async def pod(aiohttp_server: Any) -> int:
    """A vLLM pod on loopback with 3 requests waiting; its port."""
    served = await aiohttp_server(pod_app(PodLoad("llama", waiting=3)), host="127.0.0.1")
    port: int = served.port
    return port


@pytest.fixture
async def kube(tmp_path: Path, pod: int) -> AsyncIterator[FakeKubeAPI]:
    """The fake kube-apiserver: the HPA's token, its grant, and the pod's EndpointSlice."""
    async with FakeKubeAPI.running(tmp_path) as fake:
        fake.tokens["hpa-token"] = {"username": HPA, "groups": ["system:serviceaccounts"]}
        fake.grants.append(Grant(HPA, resources=("*",)))
        fake.endpoint_slices.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "addressType": "IPv4",
                "metadata": {
                    "name": "vllm-llama-abcde",
                    "namespace": "ml",
                    "labels": {"app.kubernetes.io/component": "vllm", "kubernetes.io/service-name": "vllm"},
                },
                "endpoints": [
                    {
                        "addresses": ["127.0.0.1"],
                        "conditions": {"ready": True},
                        "targetRef": {"kind": "Pod", "namespace": "ml", "name": "vllm-llama-0"},
                    }
                ],
                "ports": [{"name": "http", "port": pod}],
            }
        )
        yield fake


@pytest.fixture
def global_configuration(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every `Configuration.set_default` call (the library's global configuration), recorded."""
    calls: list[Any] = []
    monkeypatch.setattr(
        client.Configuration, "set_default", classmethod(lambda cls, default: calls.append(default))
    )
    return calls


@contextlib.asynccontextmanager
async def adapter(kube: FakeKubeAPI, *flags: str) -> AsyncIterator[int]:
    """The adapter, serving the scrape source with discovery, until the context ends; its port."""
    config_file = kube.kubeconfig.parent / "adapter.yaml"
    config_file.write_text(
        json.dumps({"source": "scrape", "scrape": {"interval": "0.5s", "timeout": "0.4s"}})
    )
    argv = [
        "serve",
        "--config",
        str(config_file),
        "--address",
        "127.0.0.1",
        "--kubeconfig",
        str(kube.kubeconfig),
    ]
    args = cli.build_parser().parse_args([*argv, *flags])
    config = load_file(args.config, serve_overrides(args))
    config = dataclasses.replace(config, server=dataclasses.replace(config.server, port=0))
    stop = asyncio.Event()
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(server.serve_config(config, stop, on_bound=bound.set_result))
    try:
        waiting: set[asyncio.Future[Any]] = {bound, task}
        await asyncio.wait(waiting, timeout=DEADLINE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # raises the start-up error
        yield bound.result()
    finally:
        stop.set()
        await asyncio.wait_for(task, DEADLINE_SECONDS)


async def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    # The self-signed serving certificate cannot be verified; what is tested here is the kube side.
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as session,
        session.get(url, headers=headers) as response,
    ):
        return response.status, await response.json()


async def test_a_token_review_and_the_endpoint_slice_list_reach_the_same_kube_apiserver(
    kube: FakeKubeAPI, tmp_path: Path, global_configuration: list[Any]
) -> None:
    """Serving securely, one request costs a TokenReview and an EndpointSlice list, both at the
    kubeconfig's server with its credential, and the value is the discovered pod's."""
    default_before = client.Configuration._default
    client_ca = CA("kubernetes").write(tmp_path, "client-ca")
    front_proxy_ca = CA("front-proxy-ca").write(tmp_path, "front-proxy-ca")
    flags = (
        "--self-signed",
        "--client-ca-file",
        str(client_ca),
        "--requestheader-client-ca-file",
        str(front_proxy_ca),
    )
    async with adapter(kube, *flags) as port:
        status, body = await get(f"https://127.0.0.1:{port}{PATH}", {"Authorization": "Bearer hpa-token"})
    assert status == 200, body
    assert [item["value"] for item in body["items"]] == ["3"]
    assert [review["spec"]["token"] for review in kube.token_reviews] == ["hpa-token"]
    assert kube.subjects_reviewed() == [HPA]
    assert [namespace for namespace, _ in kube.slice_lists][:1] == ["ml"]
    assert kube.slice_lists[0][1]["labelSelector"] == "app.kubernetes.io/component=vllm"
    assert global_configuration == []
    assert client.Configuration._default is default_before


async def test_without_authentication_discovery_still_follows_the_kubeconfig(
    kube: FakeKubeAPI, global_configuration: list[Any]
) -> None:
    """`--insecure-serving` needs no reviews, but discovery still lists through `--kubeconfig`
    (never the in-cluster or the user's default configuration)."""
    async with adapter(kube, "--insecure-serving") as port:
        status, body = await get(f"http://127.0.0.1:{port}{PATH}")
    assert status == 200, body
    assert [item["value"] for item in body["items"]] == ["3"]
    assert kube.token_reviews == [] and kube.access_reviews == []
    assert [namespace for namespace, _ in kube.slice_lists][:1] == ["ml"]
    assert global_configuration == []


async def test_an_unreadable_kubeconfig_stops_start_up_naming_it(kube: FakeKubeAPI) -> None:
    """Discovery cannot silently fall back to another cluster: a kubeconfig that does not load is
    a start-up error, even without authentication."""
    kube.kubeconfig.write_text("clusters: [")
    with pytest.raises(ConfigError, match=f"unable to load kubeconfig '{kube.kubeconfig}': "):
        async with adapter(kube, "--insecure-serving"):
            pass
    assert kube.slice_lists == []


async def test_query_discovers_through_its_kubeconfig(
    kube: FakeKubeAPI, capsys: pytest.CaptureFixture[str], global_configuration: list[Any]
) -> None:
    """`vllm-autoscale query --kubeconfig` lists EndpointSlices through the same client `serve` uses."""
    argv = [
        "query",
        "vllm_requests_waiting",
        "-n",
        "ml",
        "--source",
        "scrape",
        "--kubeconfig",
        str(kube.kubeconfig),
    ]
    assert await asyncio.to_thread(cli.main, argv) == 0
    answer = "".join(line for line in capsys.readouterr().out.splitlines() if not line.startswith("#"))
    assert json.loads(answer)["items"][0]["value"] == "3"
    assert [namespace for namespace, _ in kube.slice_lists][:1] == ["ml"]
    assert global_configuration == []
