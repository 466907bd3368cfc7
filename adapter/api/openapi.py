"""OpenAPI documents of the external metrics group, which the kube-apiserver's aggregator fetches.

`/openapi/v2` is a Swagger 2.0 document; `/openapi/v3` is the discovery index pointing to the
OpenAPI 3.0 document of the group-version, as kube-apiserver serves them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from aiohttp import web

from adapter import __version__
from adapter.api.routes import BASE, GROUP, GROUP_VERSION, VERSION

_LIST: Final = "io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValueList"
_ITEM: Final = "io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValue"
_V3_PATH: Final = f"/openapi/v3/apis/{GROUP_VERSION}"


def _schemas(ref_prefix: str) -> dict[str, Any]:
    return {
        _LIST: {
            "description": (
                "ExternalMetricValueList is a list of values for a given metric for some set labels"
            ),
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "items": {"type": "array", "items": {"$ref": f"{ref_prefix}{_ITEM}"}},
            },
            "x-kubernetes-group-version-kind": [
                {"group": GROUP, "kind": "ExternalMetricValueList", "version": VERSION}
            ],
        },
        _ITEM: {
            "description": "ExternalMetricValue is a metric value for external metric",
            "type": "object",
            "required": ["metricName", "metricLabels", "timestamp", "value"],
            "properties": {
                "metricName": {"type": "string", "description": "the name of the metric"},
                "metricLabels": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "a set of labels that identify a single time series for the metric",
                },
                "timestamp": {"type": "string", "format": "date-time", "description": "time of the sample"},
                "window": {"type": "integer", "format": "int64"},
                "value": {"type": "string", "description": "the value of the metric (a Kubernetes quantity)"},
            },
        },
    }


def _parameters() -> list[dict[str, Any]]:
    return [
        {
            "name": "namespace",
            "in": "path",
            "required": True,
            "type": "string",
            "description": "object name and auth scope",
        },
        {
            "name": "metric",
            "in": "path",
            "required": True,
            "type": "string",
            "description": "the external metric name",
        },
        {
            "name": "labelSelector",
            "in": "query",
            "type": "string",
            "description": "a selector to restrict the series",
        },
    ]


def swagger_v2() -> dict[str, Any]:
    """The Swagger 2.0 document of the group."""
    path = BASE + "/namespaces/{namespace}/{metric}"
    return {
        "swagger": "2.0",
        "info": {"title": "vllm-autoscale external metrics", "version": __version__},
        "paths": {
            path: {
                "get": {
                    "operationId": "listExternalMetricValue",
                    "produces": ["application/json"],
                    "schemes": ["https"],
                    "tags": [f"{GROUP.replace('.', '_')}_{VERSION}"],
                    "parameters": _parameters(),
                    "responses": {
                        "200": {"description": "OK", "schema": {"$ref": f"#/definitions/{_LIST}"}},
                        "401": {"description": "Unauthorized"},
                    },
                    "x-kubernetes-action": "list",
                    "x-kubernetes-group-version-kind": {
                        "group": GROUP,
                        "kind": "ExternalMetricValueList",
                        "version": VERSION,
                    },
                }
            }
        },
        "definitions": _schemas("#/definitions/"),
    }


def openapi_v3_group() -> dict[str, Any]:
    """The OpenAPI 3.0 document of the group-version."""
    path = BASE + "/namespaces/{namespace}/{metric}"
    parameters = [
        {
            "name": p["name"],
            "in": p["in"],
            "required": p.get("required", False),
            "description": p["description"],
            "schema": {"type": "string"},
        }
        for p in _parameters()
    ]
    return {
        "openapi": "3.0.0",
        "info": {"title": "vllm-autoscale external metrics", "version": __version__},
        "paths": {
            path: {
                "get": {
                    "operationId": "listExternalMetricValue",
                    "parameters": parameters,
                    "responses": {
                        "200": {
                            "description": "OK",
                            "content": {
                                "application/json": {"schema": {"$ref": f"#/components/schemas/{_LIST}"}}
                            },
                        }
                    },
                }
            }
        },
        "components": {"schemas": _schemas("#/components/schemas/")},
    }


def _digest(document: dict[str, Any]) -> str:
    return hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()[:64].upper()


async def v2(request: web.Request) -> web.Response:
    return web.json_response(swagger_v2())


async def v3_index(request: web.Request) -> web.Response:
    url = f"{_V3_PATH}?hash={_digest(openapi_v3_group())}"
    return web.json_response({"paths": {f"apis/{GROUP_VERSION}": {"serverRelativeURL": url}}})


async def v3_group(request: web.Request) -> web.Response:
    return web.json_response(openapi_v3_group())


def add_routes(app: web.Application) -> None:
    """Register the OpenAPI routes."""
    app.router.add_get("/openapi/v2", v2)
    app.router.add_get("/openapi/v3", v3_index)
    app.router.add_get(_V3_PATH, v3_group)
