"""KEDA external scaler: the adapter's metrics served over KEDA's `externalscaler` gRPC protocol.

`vllm-autoscale serve --keda-port PORT` runs it beside the external metrics API, in the same process
and event loop, reading the same provider and value cache, so a value and an error mean the same on
both front ends. Modules: `externalscaler.proto` and its generated code (`protogen` regenerates it),
`metadata` (scalerMetadata → a query), `values` (the protocol's numbers), `status` (errors → gRPC
codes), `activity` (StreamIsActive), `servicer` (the RPCs), `credentials` (TLS) and `serving`.
"""
