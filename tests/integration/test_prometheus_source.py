"""End to end: a real Prometheus scrapes vLLM-format pods; the HPA's client reads the adapter.

Processes: Prometheus (Debian package) on loopback scraping local exposition servers (several pods,
two models, one pod on an older vLLM naming, one in another namespace), and the adapter started by
`vllm-autoscale serve --insecure-serving` as a real subprocess. The official `kubernetes` Python
client's `ApiClient` performs the GET on the external metrics path exactly as the HPA's REST client
does (no kube-apiserver runs here, so the client talks to the adapter directly, as the aggregator
would proxy it).
"""

from __future__ import annotations

import calendar
import contextlib
import functools
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from adapter.vocabulary import catalogue
from adapter.vocabulary.promql.catalogue import value_query
from adapter.vocabulary.quantity import format_quantity, parse_quantity
from adapter.vocabulary.selectors import parse
from tests.integration import procs
from tests.vllm_pages import PodLoad, page

PODS = {
    # pod: (namespace, load)
    "llama-a": (
        "prod",
        PodLoad("llama", running=10, waiting=4, kv_usage=0.5, requests_per_second=20, tpot_mean=0.02),
    ),
    "llama-b": (
        "prod",
        PodLoad(
            "llama", running=6, waiting=0, kv_usage=0.3, requests_per_second=10, tpot_mean=0.05, old=True
        ),
    ),
    "llama-c": (
        "prod",
        PodLoad(
            "llama", running=8, waiting=2, kv_usage=0.7, requests_per_second=10, tpot_mean=0.03, engines=2
        ),
    ),
    "qwen-a": (
        "prod",
        PodLoad("qwen", running=3, waiting=9, kv_usage=0.9, requests_per_second=5, tpot_mean=0.1),
    ),
    "llama-staging": ("staging", PodLoad("llama", running=100, waiting=100, kv_usage=0.1)),
}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Exposition servers for every pod and a real Prometheus scraping them every second."""
    server = procs.ExpositionServer()
    scrape_configs = []
    for pod, (namespace, load) in PODS.items():
        port = server.add(pod, functools.partial(page, load))
        scrape_configs.append(
            {
                "job_name": pod,
                "static_configs": [
                    {"targets": [f"127.0.0.1:{port}"], "labels": {"namespace": namespace, "pod": pod}}
                ],
            }
        )
    workdir = tmp_path_factory.mktemp("prometheus")
    try:
        with procs.prometheus(workdir, scrape_configs) as prom:
            # Rates need at least two scrapes of every target inside the window.
            procs.wait_for(
                lambda: len(procs.prometheus_query(prom.url, "count_over_time(up[1m]) >= 3")) == len(PODS),
                60,
                what="three scrapes of every pod",
            )
            yield {"prometheus": prom, "server": server, "workdir": workdir}
    finally:
        server.close()


@pytest.fixture(scope="module")
def adapter(fleet: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The adapter as a real process: `vllm-autoscale serve --insecure-serving` on a free port."""
    workdir = tmp_path_factory.mktemp("adapter")
    config = workdir / "config.yaml"
    config.write_text(
        "prometheus: {refresh_interval: 1s, timeout: 1s, max_age: 30s}\n"
        "metrics:\n"
        "  vllm_ttft_seconds: {window: 1m}\n"
        "  vllm_tpot_seconds: {window: 1m}\n"
    )
    port = procs.free_port()
    log = (workdir / "adapter.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "adapter",
            "serve",
            "--config",
            str(config),
            "--insecure-serving",
            "--prometheus-url",
            fleet["prometheus"].url,
            "--port",
            str(port),
            "--log-level",
            "debug",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        procs.wait_for(lambda: procs.http_get(url + "/readyz")[0] == 200, 20, what="adapter readiness")
        yield url
    finally:
        process.terminate()
        process.wait(10)
        log.close()


def hpa_client(url: str) -> k8s.ApiClient:
    """The official client configured the way the HPA controller's REST client reaches the group."""
    configuration = k8s.Configuration(host=url)
    configuration.retries = False
    return k8s.ApiClient(configuration)


def hpa_get(api: k8s.ApiClient, namespace: str, metric: str, selector: str) -> dict[str, Any]:
    """GET …/namespaces/{ns}/{metric}?labelSelector=… through the client; raises ApiException on errors."""
    method, url, headers, body, post = api.param_serialize(
        "GET",
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}",
        path_params={"namespace": namespace, "metric": metric},
        query_params=[("labelSelector", selector)] if selector else [],
        header_params={"Accept": "application/json"},
    )
    response = api.call_api(method, url, headers, body, post, _request_timeout=10)
    response.read()  # type: ignore[no-untyped-call]  # kubernetes ships py.typed but leaves read() unannotated
    data = api.response_deserialize(response, {"200": "object"}).data
    # response_deserialize types `data` as the map's value type (the type *name*, a str); for "object"
    # it is the decoded JSON body.
    return cast("dict[str, Any]", data)


def status_body(error: ApiException) -> dict[str, Any]:
    """The Status object an error answer carried (ApiException keeps the raw body, or None without one)."""
    assert error.body is not None, f"HTTP {error.status} without a body"
    status: dict[str, Any] = json.loads(error.body)
    return status


def direct(prom_url: str, metric: str, namespace: str, selector: str) -> float:
    """The same metric computed by PromQL directly against Prometheus."""
    matchers = [f'namespace="{namespace}"', *parse(selector).to_promql()]
    result = procs.prometheus_query(prom_url, value_query(catalogue.builtin(metric), matchers))
    assert len(result) == 1, result
    return float(result[0]["value"][1])


CASES = [
    # metric, selector, expected (None: compare to PromQL only)
    ("vllm_requests_waiting", "model_name=llama", 4 + 0 + 2),
    ("vllm_requests_running", "model_name=llama", 10 + 6 + 8),
    ("vllm_requests_inflight", "model_name=llama", 30.0),
    ("vllm_requests_inflight", "model_name in (llama,qwen)", 42.0),
    ("vllm_requests_inflight", "model_name!=llama", 12.0),
    ("vllm_requests_inflight", "", 42.0),
    # Mean over series: llama-c has two engines, each reporting its own KV usage.
    ("vllm_kv_cache_usage", "model_name=llama", (0.5 + 0.3 + 0.7 + 0.7) / 4),
    ("vllm_kv_cache_usage", "model_name=qwen", 0.9),
    # Request-weighted mean TPOT: (20*0.02 + 10*0.05 + 10*0.03) / 40
    ("vllm_tpot_seconds", "model_name=llama", (20 * 0.02 + 10 * 0.05 + 10 * 0.03) / 40),
    ("vllm_ttft_seconds", "model_name=llama", 1.0),
]


@pytest.mark.parametrize(("metric", "selector", "expected"), CASES, ids=[f"{m} {s}" for m, s, _ in CASES])
def test_hpa_reads_what_promql_gives(
    fleet: dict[str, Any], adapter: str, metric: str, selector: str, expected: float
) -> None:
    """The value the HPA receives equals PromQL's answer (and the analytic value), older vLLM included."""
    with hpa_client(adapter) as api:
        body = hpa_get(api, "prod", metric, selector)
    assert body["kind"] == "ExternalMetricValueList"
    (item,) = body["items"]
    assert item["metricName"] == metric
    served = parse_quantity(item["value"])
    truth = direct(fleet["prometheus"].url, metric, "prod", selector)
    # Both answers may come from different scrapes; they agree to the milli-unit the HPA sees.
    assert format_quantity(served) == format_quantity(truth) or math.isclose(served, truth, abs_tol=0.0015)
    assert served == pytest.approx(expected, abs=0.0015)
    age = time.time() - calendar.timegm(time.strptime(item["timestamp"], "%Y-%m-%dT%H:%M:%SZ"))
    assert age < 60


def test_namespace_isolation(adapter: str) -> None:
    """The path namespace scopes the query: staging's huge queue does not leak into prod."""
    with hpa_client(adapter) as api:
        staging = hpa_get(api, "staging", "vllm_requests_inflight", "model_name=llama")
        empty = None
        try:
            hpa_get(api, "nowhere", "vllm_requests_inflight", "model_name=llama")
        except ApiException as exc:
            empty = exc
    assert staging["items"][0]["value"] == "200"
    assert empty is not None and empty.status == 503
    assert status_body(empty)["message"].endswith("no matching targets")


def test_hostile_selector_values_are_harmless(fleet: dict[str, Any]) -> None:
    """A value crafted to break out of its string is, once
    escaped, just a value Prometheus matches literally."""
    from adapter.vocabulary.selectors import Operator, Requirement

    hostile = Requirement("model_name", Operator.EQUALS, ('llama"} or vector(1) or {x="',))
    promql = f"sum(vllm:num_requests_running{{{hostile.to_promql()}}})"
    assert procs.prometheus_query(fleet["prometheus"].url, promql) == []
    regex = Requirement("model_name", Operator.IN, ("ll.ma", "qw(en"))
    assert (
        procs.prometheus_query(fleet["prometheus"].url, f"vllm:num_requests_running{{{regex.to_promql()}}}")
        == []
    )


def test_errors_reach_the_client_as_status(adapter: str) -> None:
    """Unknown metric → 404, bad selector → 400, both as Status bodies the client can decode."""
    with hpa_client(adapter) as api:
        with pytest.raises(ApiException) as unknown:
            hpa_get(api, "prod", "gpu_utilisation", "")
        with pytest.raises(ApiException) as bad:
            hpa_get(api, "prod", "vllm_requests_waiting", "replicas>2")
    assert unknown.value.status == 404 and status_body(unknown.value)["reason"] == "NotFound"
    assert bad.value.status == 400 and status_body(bad.value)["reason"] == "BadRequest"


def test_prometheus_outage_is_503_then_recovers(fleet: dict[str, Any], adapter: str) -> None:
    """Kill Prometheus: answers become 503 within timeout + refresh; restart it: values come back."""
    prom = fleet["prometheus"]
    with hpa_client(adapter) as api:
        assert hpa_get(api, "prod", "vllm_requests_waiting", "model_name=qwen")["items"][0]["value"] == "9"
        prom.stop()
        killed = time.monotonic()

        def unavailable() -> int | None:
            try:
                hpa_get(api, "prod", "vllm_requests_waiting", "model_name=qwen")
            except ApiException as exc:
                return int(exc.status)
            return None

        status = procs.wait_for(unavailable, 10, interval=0.1, what="503 after Prometheus died")
        outage_seen = time.monotonic() - killed
        assert status == 503
        # refresh 1 s + connection refused (immediate) or timeout 1 s, plus polling slack
        assert outage_seen < 4, f"outage took {outage_seen:.1f}s to show"

        procs.restart(prom)

        def recovered() -> str | None:
            try:
                return str(
                    hpa_get(api, "prod", "vllm_requests_waiting", "model_name=qwen")["items"][0]["value"]
                )
            except ApiException:
                return None

        assert procs.wait_for(recovered, 30, what="values after Prometheus restarted") == "9"


def test_query_command_prints_what_the_hpa_gets(fleet: dict[str, Any]) -> None:
    """`vllm-autoscale query` prints the PromQL used, the HPA's JSON and the sample age. An earlier
    test of the module restarts Prometheus: the command is retried until it has scraped qwen again."""
    runs: list[subprocess.CompletedProcess[str]] = []

    def answered() -> bool:
        runs.append(
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "adapter",
                    "query",
                    "vllm_requests_inflight",
                    "-n",
                    "prod",
                    "-l",
                    "model_name=qwen",
                    "--prometheus-url",
                    fleet["prometheus"].url,
                ],
                capture_output=True,
                text=True,
                timeout=30,
            )
        )
        return runs[-1].returncode == 0

    with contextlib.suppress(AssertionError):
        procs.wait_for(answered, 30, what="the query command's answer")
    result = runs[-1]
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(
        '# value:    sum(vllm:num_requests_running{namespace="prod", model_name="qwen"})'
    )
    body = json.loads("\n".join(line for line in lines if not line.startswith("#")))
    assert body["items"][0]["value"] == "12"
    assert "sample age" in lines[-1]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(min_size=1, max_size=40))
def test_real_prometheus_parses_any_escaped_value(fleet: dict[str, Any], value: str) -> None:
    """Prometheus itself accepts every rendered matcher and matches the value literally: whatever the
    value, the query parses and no series of the fleet matches it (none has that model name)."""
    from adapter.vocabulary.selectors import Operator, Requirement

    for operator in (Operator.EQUALS, Operator.IN):
        if value in {load.model for _ns, load in PODS.values()}:
            continue
        matcher = Requirement("model_name", operator, (value,)).to_promql()
        assert (
            procs.prometheus_query(fleet["prometheus"].url, f"vllm:num_requests_running{{{matcher}}}") == []
        )
