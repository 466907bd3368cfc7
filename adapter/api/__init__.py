"""The HTTP surface: the aggregated API's routes, the OpenAPI documents, the health probes and /metrics."""
