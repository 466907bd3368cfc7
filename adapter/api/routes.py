"""The aggregated API: discovery documents and `ExternalMetricValueList` answers.

This module knows Kubernetes shapes and HTTP, nothing about PromQL or a concrete source: it parses
the request, asks the provider, and turns the answer (or an `AdapterError`) into JSON. It is the only
place where an error becomes a `Status`.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from datetime import UTC, datetime
from typing import Any, Final

from aiohttp import web

from adapter.errors import AdapterError, BadRequest, InvalidNamespace
from adapter.provider import CachedProvider, MetricValue
from adapter.telemetry import Telemetry
from adapter.vocabulary import selectors
from adapter.vocabulary.names import check_namespace, echo
from adapter.vocabulary.quantity import format_quantity

log = logging.getLogger(__name__)

GROUP: Final = "external.metrics.k8s.io"
VERSION: Final = "v1beta1"
GROUP_VERSION: Final = f"{GROUP}/{VERSION}"
BASE: Final = f"/apis/{GROUP_VERSION}"

PROVIDER: Final = web.AppKey("provider", CachedProvider)
TELEMETRY: Final = web.AppKey("telemetry", Telemetry)


def rfc3339(timestamp: float) -> str:
    """A `metav1.Time` string (second precision, UTC), as the apiserver serializes it."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_response(error: AdapterError, metric: str = "") -> web.Response:
    """The `Status` JSON of an error, with its HTTP code."""
    return web.json_response(error.status(metric), status=error.code)


@functools.lru_cache(maxsize=4096)
def _rendered(metric: str, labels: tuple[tuple[str, str], ...], value: float, timestamp: float) -> bytes:
    # A key's sample changes once per refresh while the HPA may read it many times in between.
    item = MetricValue(metric, dict(labels), value, timestamp, 0.0)
    return json.dumps(value_list(item), separators=(",", ":")).encode()


def render(value: MetricValue) -> bytes:
    """The JSON body of an `ExternalMetricValueList` answer."""
    return _rendered(value.metric, tuple(sorted(value.labels.items())), value.value, value.timestamp)


def value_list(value: MetricValue) -> dict[str, Any]:
    """An `ExternalMetricValueList` holding exactly one aggregated item."""
    return {
        "kind": "ExternalMetricValueList",
        "apiVersion": GROUP_VERSION,
        "metadata": {},
        "items": [
            {
                "metricName": value.metric,
                "metricLabels": value.labels,
                "timestamp": rfc3339(value.timestamp),
                "value": format_quantity(value.value),
            }
        ],
    }


def _group_version_for_discovery() -> dict[str, str]:
    return {"groupVersion": GROUP_VERSION, "version": VERSION}


async def api_group_list(request: web.Request) -> web.Response:
    return web.json_response(
        {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": GROUP,
                    "versions": [_group_version_for_discovery()],
                    "preferredVersion": _group_version_for_discovery(),
                }
            ],
        }
    )


async def api_group(request: web.Request) -> web.Response:
    return web.json_response(
        {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": GROUP,
            "versions": [_group_version_for_discovery()],
            "preferredVersion": _group_version_for_discovery(),
        }
    )


async def api_resource_list(request: web.Request) -> web.Response:
    provider = request.app[PROVIDER]
    return web.json_response(
        {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": GROUP_VERSION,
            "resources": [
                {
                    "name": metric.name,
                    "singularName": "",
                    "namespaced": True,
                    "kind": "ExternalMetricValueList",
                    "verbs": ["get"],
                }
                for metric in provider.list_all()
            ],
        }
    )


async def external_metric(request: web.Request) -> web.Response:
    """GET …/namespaces/{namespace}/{metric}?labelSelector=…"""
    provider = request.app[PROVIDER]
    telemetry = request.app[TELEMETRY]
    name = request.match_info["metric"]
    namespace = request.match_info["namespace"]
    raw_selector = request.query.get("labelSelector")
    started = time.monotonic()
    # Unknown names are folded into one label value so a scanner cannot explode our cardinality.
    metric_label = name if provider.serves(name) else "<unknown>"
    code = 200
    try:
        check_namespace(namespace)
        if len(request.query.getall("labelSelector", [])) > 1:
            raise BadRequest("labelSelector given more than once")
        selector = selectors.parse(raw_selector)
        value = await provider.get(name, namespace, selector)
        response = web.Response(body=render(value), content_type="application/json")
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "served",
                extra={
                    "metric": name,
                    "namespace": namespace,
                    "selector": raw_selector or "",
                    "value": value.value,
                    "sample_age": round(value.age, 3),
                    "source_latency": round(time.monotonic() - started, 6),
                },
            )
        return response
    except AdapterError as error:
        code = error.code
        telemetry.errors.labels(metric_label, error.label).inc()
        log.log(
            logging.WARNING if code >= 500 else logging.INFO,
            "request failed: %s",
            error,
            extra={
                # A rejected namespace is logged escaped and cut: it may hold newlines or be huge.
                "metric": name,
                "selector": raw_selector or "",
                "namespace": echo(namespace) if isinstance(error, InvalidNamespace) else namespace,
                "code": code,
                "reason": error.label,
                "source_latency": round(time.monotonic() - started, 6),
            },
        )
        return status_response(error, name)
    finally:
        series = telemetry.series(metric_label)
        (series.ok if code == 200 else telemetry.requests.labels(metric_label, str(code))).inc()
        series.request_seconds.observe(time.monotonic() - started)


def add_routes(app: web.Application) -> None:
    """Register the aggregated-API routes."""
    app.router.add_get("/apis", api_group_list)
    app.router.add_get(f"/apis/{GROUP}", api_group)
    app.router.add_get(BASE, api_resource_list)
    app.router.add_get(BASE + "/namespaces/{namespace}/{metric}", external_metric)
