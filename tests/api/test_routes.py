"""The aggregated API: discovery, ExternalMetricValueList answers, and every error as a Status.

The app is the real one from create_app; only the source is a FakeSource, so these tests cover the
whole failure table of DESIGN.md §3 above the source.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from datetime import UTC, datetime

import pytest

from adapter.api.routes import PROVIDER
from adapter.errors import NoTargets, PartialFailure, SourceUnavailable, Unresolved
from adapter.sources import Sample
from tests.conftest import MakeClient
from tests.fakes import Answer, FakeSource
from tests.waiting import eventually

BASE = "/apis/external.metrics.k8s.io/v1beta1"


async def test_discovery_documents(make_client: MakeClient) -> None:
    """/apis, the group and the group-version list the group and every configured metric."""
    client, _ = await make_client("metrics: {queue_depth: {query: 'sum(q)', namespaced: false}}")
    groups = await (await client.get("/apis")).json()
    assert groups["kind"] == "APIGroupList"
    assert groups["groups"][0]["name"] == "external.metrics.k8s.io"
    assert groups["groups"][0]["preferredVersion"]["groupVersion"] == "external.metrics.k8s.io/v1beta1"
    group = await (await client.get("/apis/external.metrics.k8s.io")).json()
    assert group["kind"] == "APIGroup" and group["versions"][0]["version"] == "v1beta1"
    resources = await (await client.get(BASE)).json()
    assert resources["kind"] == "APIResourceList"
    names = [r["name"] for r in resources["resources"]]
    assert names[:6] == [
        "vllm_requests_waiting",
        "vllm_requests_running",
        "vllm_requests_inflight",
        "vllm_kv_cache_usage",
        "vllm_tpot_seconds",
        "vllm_ttft_seconds",
    ]
    assert "queue_depth" in names
    assert all(
        r["kind"] == "ExternalMetricValueList" and r["verbs"] == ["get"] for r in resources["resources"]
    )


async def test_one_aggregated_item_with_sample_time_and_quantity(make_client: MakeClient) -> None:
    """The answer holds exactly one item: its timestamp is the sample's, its value a quantity."""
    sample_time = time.time() - 3
    client, fake = await make_client(
        source=FakeSource({"vllm_kv_cache_usage": Sample(0.7304, sample_time, 3)})
    )
    response = await client.get(
        f"{BASE}/namespaces/prod/vllm_kv_cache_usage", params={"labelSelector": "model_name=llama"}
    )
    assert response.status == 200
    body = await response.json()
    assert body["kind"] == "ExternalMetricValueList"
    assert body["apiVersion"] == "external.metrics.k8s.io/v1beta1"
    assert len(body["items"]) == 1
    item = body["items"][0]
    assert item["metricName"] == "vllm_kv_cache_usage"
    assert item["metricLabels"] == {"model_name": "llama"}
    assert item["value"] == "730m"
    assert item["timestamp"] == datetime.fromtimestamp(sample_time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert fake.fetches[0][1] == "prod", "the path namespace scopes the query"


async def test_namespaced_false_ignores_the_path_namespace(make_client: MakeClient) -> None:
    """A metric with namespaced: false is fetched without a namespace scope."""
    client, fake = await make_client(
        "metrics: {queue_depth: {query: 'sum(q)', namespaced: false}}",
        FakeSource({"queue_depth": Sample(42.0, time.time())}),
    )
    body = await (await client.get(f"{BASE}/namespaces/anything/queue_depth")).json()
    assert body["items"][0]["value"] == "42"
    assert fake.fetches[0][1] is None


@pytest.mark.parametrize(
    ("answer", "config", "code", "reason", "message_part"),
    [
        pytest.param(
            SourceUnavailable("connect to http://10.0.0.1:9090 refused"),
            "",
            503,
            "ServiceUnavailable",
            "source is unavailable",
            id="source unreachable is 503 never a number",
        ),
        pytest.param(
            Sample(5.0, time.time() - 3600),
            "",
            503,
            "ServiceUnavailable",
            "too old",
            id="stale sample is 503",
        ),
        pytest.param(
            NoTargets("no series"),
            "",
            503,
            "ServiceUnavailable",
            "no matching targets",
            id="no targets is 503",
        ),
        pytest.param(
            PartialFailure("2 of 5 pods failed"),
            "",
            503,
            "ServiceUnavailable",
            "some targets failed",
            id="partial scrape failure under on_partial error is 503",
        ),
        pytest.param(
            Unresolved("p90 in first bucket"),
            "",
            503,
            "ServiceUnavailable",
            "not resolved",
            id="unresolved quantile is 503",
        ),
        pytest.param(
            lambda *_: Sample(None, time.time(), 2),
            "",
            503,
            "ServiceUnavailable",
            "does not report a gauge",
            id="absent gauge on present targets is 503 never on_empty",
        ),
        pytest.param(
            lambda *_: Sample(math.nan, time.time(), 2),
            "",
            503,
            "ServiceUnavailable",
            "does not report a gauge",
            id="NaN gauge is 503 never on_empty",
        ),
    ],
)
async def test_failure_table_errors(
    make_client: MakeClient, answer: Answer, config: str, code: int, reason: str, message_part: str
) -> None:
    """Every failure row answers a Status with the right code; the message never leaks the cause."""
    client, _ = await make_client(config, FakeSource({"vllm_requests_waiting": answer}))
    response = await client.get(f"{BASE}/namespaces/prod/vllm_requests_waiting")
    assert response.status == code
    status = await response.json()
    assert status["kind"] == "Status" and status["status"] == "Failure"
    assert (status["code"], status["reason"]) == (code, reason)
    assert message_part in status["message"]
    for secret in ("10.0.0.1", "9090", "pods failed", "first bucket", "series"):
        assert secret not in status["message"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, "0", id="no traffic in the window answers on_empty"),
        pytest.param(math.nan, "0", id="NaN mean (0/0 rate) is treated as empty"),
        pytest.param(math.inf, "0", id="Inf is treated as empty"),
    ],
)
async def test_empty_answers_on_empty(make_client: MakeClient, value: float | None, expected: str) -> None:
    """Healthy source, targets present, an event statistic with no data: the metric's on_empty value."""
    client, _ = await make_client(source=FakeSource({"vllm_tpot_seconds": Sample(value, time.time(), 2)}))
    body = await (await client.get(f"{BASE}/namespaces/prod/vllm_tpot_seconds")).json()
    assert body["items"][0]["value"] == expected


async def test_empty_event_statistic_with_on_empty_error_is_503(make_client: MakeClient) -> None:
    """`on_empty: error` turns an event statistic with no data into 503 instead of a value."""
    client, _ = await make_client(
        "metrics: {vllm_tpot_seconds: {on_empty: error}}",
        FakeSource({"vllm_tpot_seconds": Sample(None, time.time(), 2)}),
    )
    response = await client.get(f"{BASE}/namespaces/prod/vllm_tpot_seconds")
    assert response.status == 503
    assert "no data" in (await response.json())["message"]


async def test_unknown_metric_is_404(make_client: MakeClient) -> None:
    """An unknown metric name is a NotFound Status, and the source is never asked."""
    client, fake = await make_client()
    response = await client.get(f"{BASE}/namespaces/prod/cpu_usage")
    assert response.status == 404
    status = await response.json()
    assert status["reason"] == "NotFound" and "cpu_usage" in status["message"]
    assert fake.fetches == []


@pytest.mark.parametrize(
    "selector",
    [
        pytest.param("replicas>3", id="greater-than"),
        pytest.param("a in (b", id="unterminated set"),
        pytest.param('model_name="x"}', id="hostile quote"),
    ],
)
async def test_bad_selector_is_400(make_client: MakeClient, selector: str) -> None:
    """A malformed selector is a BadRequest Status naming the problem; the source is never asked."""
    client, fake = await make_client()
    response = await client.get(
        f"{BASE}/namespaces/prod/vllm_requests_waiting", params={"labelSelector": selector}
    )
    assert response.status == 400
    status = await response.json()
    assert status["reason"] == "BadRequest" and status["message"].startswith("invalid label selector: ")
    assert fake.fetches == []


async def test_unknown_path_is_a_status(make_client: MakeClient) -> None:
    """Even an unknown path answers a Kubernetes Status, not an HTML page."""
    client, _ = await make_client()
    response = await client.get("/apis/custom.metrics.k8s.io/v1beta1")
    assert response.status == 404
    assert (await response.json())["kind"] == "Status"


async def test_single_flight_through_the_api(make_client: MakeClient) -> None:
    """Fifty concurrent identical requests cause one upstream fetch."""
    client, fake = await make_client(source=FakeSource(delay=0.05))
    url = f"{BASE}/namespaces/prod/vllm_requests_running"
    responses = await asyncio.gather(
        *(client.get(url, params={"labelSelector": "model_name=a"}) for _ in range(50))
    )
    assert {r.status for r in responses} == {200}
    assert len(fake.fetches) == 1


async def test_equivalent_selectors_share_a_key(make_client: MakeClient) -> None:
    """Selectors that differ only in order or spacing hit the same cache key."""
    client, fake = await make_client()
    url = f"{BASE}/namespaces/prod/vllm_requests_running"
    await client.get(url, params={"labelSelector": "b=2,a=1"})
    await client.get(url, params={"labelSelector": "a=1, b=2"})
    assert len(fake.fetches) == 1


async def test_health_and_readiness(make_client: MakeClient) -> None:
    """healthz/livez answer at once; readyz only once the source has answered."""
    fake = FakeSource()
    fake.ping_error = SourceUnavailable("not yet")
    client, _ = await make_client(source=fake)
    assert (await client.get("/healthz")).status == 200
    assert (await client.get("/livez")).status == 200
    assert (await client.get("/readyz")).status == 503
    fake.ping_error = None

    async def ready() -> bool:
        return (await client.get("/readyz")).status == 200

    await eventually(ready, 5.0, "readiness after the source answered", interval=0.05)


async def test_own_metrics(make_client: MakeClient) -> None:
    """/metrics exports requests by metric and code, cache hits/misses, errors and sample age."""
    client, _ = await make_client(
        source=FakeSource(
            {"vllm_requests_waiting": Sample(3.0, time.time() - 2, 1), "vllm_tpot_seconds": NoTargets("x")}
        )
    )
    await client.get(f"{BASE}/namespaces/p/vllm_requests_waiting")
    await client.get(f"{BASE}/namespaces/p/vllm_requests_waiting")
    await client.get(f"{BASE}/namespaces/p/vllm_tpot_seconds")
    await client.get(f"{BASE}/namespaces/p/nope")
    text = await (await client.get("/metrics")).text()
    assert 'vllm_autoscale_requests_total{code="200",metric="vllm_requests_waiting"} 2.0' in text
    assert 'vllm_autoscale_requests_total{code="503",metric="vllm_tpot_seconds"} 1.0' in text
    assert 'vllm_autoscale_requests_total{code="404",metric="<unknown>"} 1.0' in text
    assert 'vllm_autoscale_errors_total{metric="vllm_tpot_seconds",reason="no_targets"} 1.0' in text
    assert "vllm_autoscale_cache_hits_total 1.0" in text
    assert "vllm_autoscale_cache_misses_total 2.0" in text
    assert 'vllm_autoscale_served_sample_age_seconds_count{metric="vllm_requests_waiting"} 2.0' in text


async def test_openapi_documents(make_client: MakeClient) -> None:
    """The aggregator can fetch OpenAPI v2 and v3 documents describing the group."""
    client, _ = await make_client()
    v2 = await (await client.get("/openapi/v2")).json()
    assert v2["swagger"] == "2.0"
    assert "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}" in v2["paths"]
    ref = v2["paths"]["/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}"]["get"][
        "responses"
    ]["200"]
    assert ref["schema"]["$ref"].removeprefix("#/definitions/") in v2["definitions"]
    index = await (await client.get("/openapi/v3")).json()
    url = index["paths"]["apis/external.metrics.k8s.io/v1beta1"]["serverRelativeURL"]
    v3 = await (await client.get(url)).json()
    assert v3["openapi"].startswith("3.")
    assert any(name.endswith("ExternalMetricValueList") for name in v3["components"]["schemas"])


async def test_held_sample_age_tracks_live_keys_only(make_client: MakeClient) -> None:
    """The held-sample-age gauge is computed at scrape time from live keys, so it shows what would be
    served now, per metric, and says nothing about metrics nobody asks for."""
    client, _ = await make_client(
        source=FakeSource({"vllm_requests_waiting": lambda *_: Sample(3.0, time.time() - 20, 1)})
    )
    await client.get(f"{BASE}/namespaces/p/vllm_requests_waiting")
    text = await (await client.get("/metrics")).text()
    (line,) = [x for x in text.splitlines() if x.startswith("vllm_autoscale_held_sample_age_seconds{")]
    assert line.startswith('vllm_autoscale_held_sample_age_seconds{metric="vllm_requests_waiting"}')
    assert 19.5 < float(line.split()[-1]) < 30


async def test_too_many_selectors_is_429(make_client: MakeClient) -> None:
    """Past cache.max_keys distinct keys, a new selector gets 429 TooManyRequests; known ones still answer."""
    client, _ = await make_client("cache: {max_keys: 2}")
    url = f"{BASE}/namespaces/prod/vllm_requests_running"
    assert (await client.get(url, params={"labelSelector": "model_name=a"})).status == 200
    assert (await client.get(url, params={"labelSelector": "model_name=b"})).status == 200
    response = await client.get(url, params={"labelSelector": "model_name=c"})
    assert response.status == 429
    assert (await response.json())["reason"] == "TooManyRequests"
    assert (await client.get(url, params={"labelSelector": "model_name=a"})).status == 200


JUNK_NAMESPACES = [
    pytest.param("a" * 6000, "a" * 6000, id="6000 characters"),
    pytest.param("%00", "\x00", id="NUL byte"),
    pytest.param("-", "-", id="a lone dash"),
    pytest.param("Prod", "Prod", id="upper case"),
    pytest.param("a_b", "a_b", id="underscore"),
    pytest.param("a" * 64, "a" * 64, id="64 characters, one past the DNS label limit"),
    pytest.param("prod-", "prod-", id="ends with a dash"),
    pytest.param("pr%C3%B6d", "pröd", id="non-ASCII letter"),
]


@pytest.mark.parametrize(("segment", "decoded"), JUNK_NAMESPACES)
async def test_invalid_namespace_is_400_before_any_cost(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture, segment: str, decoded: str
) -> None:
    """A namespace that is not a DNS label is a BadRequest Status naming the namespace, answered
    before it creates a cache key or costs an upstream query; the log line carries it escaped and cut."""
    caplog.set_level(logging.INFO, logger="adapter.api.routes")
    client, fake = await make_client()
    assert client.app is not None
    cache = client.app[PROVIDER].cache
    keys_before = len(cache)
    response = await client.get(f"{BASE}/namespaces/{segment}/vllm_requests_waiting")
    assert response.status == 400
    status = await response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "BadRequest", 400)
    assert status["message"].startswith("invalid namespace ")
    assert "RFC 1123" in status["message"]
    assert len(status["message"]) < 300, "the caller's input is echoed truncated"
    assert decoded[:20].encode("unicode_escape").decode() in status["message"]
    assert len(cache) == keys_before
    assert fake.fetches == []
    (record,) = [r for r in caplog.records if r.getMessage().startswith("request failed")]
    logged = vars(record)["namespace"]  # an `extra` field
    assert len(logged) < 200 and logged.isprintable()


@pytest.mark.parametrize("namespace", ["a", "prod", "team-a-01", "0", "a" * 63])
async def test_valid_namespaces_are_served(make_client: MakeClient, namespace: str) -> None:
    """Every DNS label up to 63 characters is a namespace the source is asked about."""
    client, fake = await make_client()
    response = await client.get(f"{BASE}/namespaces/{namespace}/vllm_requests_waiting")
    assert response.status == 200
    assert fake.fetches[0][1] == namespace


async def test_junk_namespaces_cannot_crowd_out_a_real_key(make_client: MakeClient) -> None:
    """With max_keys junk requests in a row, a legitimate new key is still served (no 429 from junk)."""
    client, fake = await make_client("cache: {max_keys: 56}")
    for i in range(56):
        junk = f"Junk_{i}"
        assert (await client.get(f"{BASE}/namespaces/{junk}/vllm_requests_waiting")).status == 400
    assert fake.fetches == []
    assert (await client.get(f"{BASE}/namespaces/prod/vllm_requests_waiting")).status == 200
