"""Secure serving when the kube-apiserver fails or hangs: a generic 503 Status, never an allow and
never a hung request; the log says why.

The kube-apiserver is `tests.kubeapi_fake.FakeKubeAPI` (tests/integration/secure_serving/harness.py),
made to fail or to stall its reviews.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.secure_serving.harness import (
    HPA_USER,
    Cluster,
    StartAdapter,
    front_proxy_headers,
    metric_path,
)
from tests.kubeapi_fake import FakeKubeAPI


@pytest.mark.parametrize(
    ("credentials", "call"),
    [
        pytest.param("front-proxy", "subjectaccessreview", id="subject access review fails"),
        pytest.param("token", "tokenreview", id="token review fails"),
    ],
)
async def test_kube_apiserver_failure_is_503_never_an_allow(
    start_adapter: StartAdapter,
    cluster: Cluster,
    grants: FakeKubeAPI,
    caplog: pytest.LogCaptureFixture,
    credentials: str,
    call: str,
) -> None:
    """When a review cannot be made the answer is a generic
    503 Status: not the metric, not a 401; the log says why."""
    adapter = await start_adapter()
    grants.failing = True
    if credentials == "front-proxy":
        status, body = await adapter.get(
            metric_path(), cert=cluster.front_proxy, headers=front_proxy_headers(HPA_USER)
        )
    else:
        status, body = await adapter.get(metric_path(), headers={"Authorization": "Bearer bob-token"})
    assert (status, body["kind"], body["reason"], body["code"]) == (503, "Status", "ServiceUnavailable", 503)
    assert (
        "etcdserver" not in body["message"]
        and "500" not in body["message"]
        and "127.0.0.1" not in body["message"]
    )
    assert any(f"unable to create {call}: HTTP 500" in r.getMessage() for r in caplog.records)


async def test_a_hanging_kube_apiserver_cannot_hang_requests(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI
) -> None:
    """With every review stalled, many concurrent requests (more than the client's worker threads) each get a
    503 Status within about the review timeout, and the probes keep answering."""
    adapter = await start_adapter(config_text="security:\n  review_timeout: 500ms\n")
    grants.stalled = True
    started = time.monotonic()
    # Distinct users: no two requests share one review, so 48 reviews hang at once, far more than the
    # client has worker threads: the deadline must count the wait for a worker, or they queue in waves.
    answers = await asyncio.gather(
        *(
            adapter.get(metric_path(), cert=cluster.front_proxy, headers=front_proxy_headers(f"user-{i}"))
            for i in range(48)
        )
    )
    elapsed = time.monotonic() - started
    assert [(status, body["reason"]) for status, body in answers] == [(503, "ServiceUnavailable")] * 48
    # The review timeout (0.5 s) plus 48 TLS handshakes (about 1 s on an idle 2-core machine, 3 s on a
    # loaded one); waves of stuck workers would take 4 s or more, so the bound stays below that.
    assert elapsed < 3.8, elapsed
    assert grants.stalled_calls >= 1
    assert (await adapter.get("/healthz"))[0] == 200
