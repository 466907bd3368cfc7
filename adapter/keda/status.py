"""Adapter errors as gRPC statuses: every row of the failure table is an error, never a value.

The code follows the HTTP status the same error has in the external metrics API, so both front
ends fail alike; the message is the same generic outward one (never a URL, PromQL or exception
text). The error's reason (`stale`, `no_targets`, ...) travels in the trailing metadata under
`REASON_KEY`, for clients and tests that need to tell the rows apart.
"""

from __future__ import annotations

from typing import Final

import grpc

from adapter.errors import AdapterError

#: trailing-metadata key carrying the error's reason label (as in `vllm_autoscale_errors_total`)
REASON_KEY: Final = "vllm-autoscale-reason"

_CODES: Final = {
    400: grpc.StatusCode.INVALID_ARGUMENT,  # bad metadata, selector or namespace
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,  # metric not in the catalogue
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,  # too many distinct keys (cache.max_keys)
    503: grpc.StatusCode.UNAVAILABLE,  # source down, stale, no targets, gauge gaps, partial, ...
}


def code_of(error: AdapterError) -> grpc.StatusCode:
    """The gRPC code of an adapter error; anything unmapped is `INTERNAL`."""
    return _CODES.get(error.code, grpc.StatusCode.INTERNAL)


def details_of(error: AdapterError, metric: str) -> str:
    """The outward message: the one the HTTP API puts in its `Status`."""
    return error.status(metric)["message"]
