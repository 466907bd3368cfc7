"""Structured logs: one JSON object a line, with the request's metric, namespace, selector and latency."""

from __future__ import annotations

import json
import logging

import pytest

from adapter import logs
from tests.conftest import MakeClient


def test_json_formatter_carries_extras() -> None:
    """Fields passed through `extra=` appear as top-level keys of the JSON line."""
    record = logging.LogRecord("adapter.api.routes", logging.DEBUG, __file__, 1, "served %s", ("x",), None)
    record.metric = "vllm_requests_waiting"
    line = json.loads(logs.JSONFormatter().format(record))
    assert line["message"] == "served x"
    assert line["level"] == "debug"
    assert line["metric"] == "vllm_requests_waiting"
    assert line["time"].endswith("+00:00")


def test_text_formatter_is_one_readable_line() -> None:
    """The text format puts extras after the message as key=value."""
    record = logging.LogRecord("adapter", logging.INFO, __file__, 1, "ready", (), None)
    record.source = "prometheus"
    assert logs.TextFormatter().format(record).endswith("adapter: ready  source=prometheus")


async def test_every_served_request_is_logged_at_debug(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    """At debug level each answer logs metric, namespace, selector and source latency."""
    client, _ = await make_client()
    with caplog.at_level(logging.DEBUG, logger="adapter.api.routes"):
        await client.get(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/prod/vllm_requests_running",
            params={"labelSelector": "model_name=llama"},
        )
    (record,) = [r for r in caplog.records if r.getMessage() == "served"]
    assert record.__dict__["metric"] == "vllm_requests_running"
    assert record.__dict__["namespace"] == "prod"
    assert record.__dict__["selector"] == "model_name=llama"
    assert record.__dict__["source_latency"] >= 0
    assert json.loads(logs.JSONFormatter().format(record))["selector"] == "model_name=llama"


async def test_failures_log_the_precise_cause(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The outward Status is generic; the log line names the cause."""
    from adapter.errors import SourceUnavailable
    from tests.fakes import FakeSource

    client, _ = await make_client(
        source=FakeSource(
            {"vllm_requests_running": SourceUnavailable("query to http://prom:9090 timed out after 5s")}
        )
    )
    with caplog.at_level(logging.INFO, logger="adapter.api.routes"):
        response = await client.get(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/prod/vllm_requests_running"
        )
    assert "prom:9090" not in (await response.text())
    assert any("prom:9090 timed out" in r.getMessage() for r in caplog.records)
