"""The `externalscaler.ExternalScaler` service: KEDA's questions answered by the HTTP API's provider.

Every value comes from the same `CachedProvider` (catalogue, value cache, failure table) the external
metrics API reads, so for one metric, namespace and selector both front ends serve the same number,
and every error of the failure table is a gRPC error here, never a value: KEDA's `fallback` then
decides what the replicas do.

| RPC                | answer                                                                         |
|--------------------|--------------------------------------------------------------------------------|
| `GetMetricSpec`    | `metricName` = the metric, `targetSizeFloat` = `target`, `targetSize` = ceil   |
| `GetMetrics`       | one `MetricValue`: the served value and its integer                             |
| `IsActive`         | served value > `activationTarget`                                               |
| `StreamIsActive`   | `IsActive` at once, then on every change, at most once per refresh interval     |
| `StreamMetricSpec` | `UNIMPLEMENTED` (KEDA then polls `GetMetricSpec`)                               |
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from adapter.errors import AdapterError, InvalidMetadata
from adapter.keda import activity, metadata, status, values
from adapter.keda import externalscaler_pb2 as pb
from adapter.keda.metadata import ScalerQuery
from adapter.provider import CachedProvider
from adapter.telemetry import Telemetry
from adapter.vocabulary.names import echo

log = logging.getLogger(__name__)

T = TypeVar("T")
Context = grpc.aio.ServicerContext[object, object]


class ExternalScaler:
    """The servicer; `close()` ends every open `StreamIsActive` cleanly (server shutdown)."""

    def __init__(self, provider: CachedProvider, telemetry: Telemetry, *, refresh_interval: float) -> None:
        self.provider = provider
        self.telemetry = telemetry
        self.refresh_interval = refresh_interval
        self.closing = asyncio.Event()
        # Label children bound once: `labels()` costs a lock and a lookup on every call.
        self._calls: dict[tuple[str, grpc.StatusCode], Any] = {}
        self._seconds: dict[str, Any] = {}

    def close(self) -> None:
        """Let open streams finish: each ends with status OK within one refresh interval at most."""
        self.closing.set()

    # --- the RPCs -------------------------------------------------------------------------------

    async def GetMetricSpec(self, request: pb.ScaledObjectRef, context: Context) -> pb.GetMetricSpecResponse:
        async def answer(query: ScalerQuery) -> pb.GetMetricSpecResponse:
            self.provider.lookup(query.metric)
            spec = pb.MetricSpec(
                metricName=query.metric,
                targetSize=values.target_size(query.target),
                targetSizeFloat=query.target,
            )
            return pb.GetMetricSpecResponse(metricSpecs=[spec])

        return await self._unary("GetMetricSpec", request, context, answer)

    async def GetMetrics(self, request: pb.GetMetricsRequest, context: Context) -> pb.GetMetricsResponse:
        async def answer(query: ScalerQuery) -> pb.GetMetricsResponse:
            # KEDA asks by the name GetMetricSpec gave (its `sN-` prefix removed); another name is a bug.
            if request.metricName not in ("", query.metric):
                raise InvalidMetadata(
                    f"metricName {echo(request.metricName)} is not the scalerMetadata metric "
                    f"{query.metric!r} (GetMetricSpec names it)"
                )
            value = await self._served(query)
            item = pb.MetricValue(
                metricName=query.metric, metricValue=values.rounded(value), metricValueFloat=value
            )
            return pb.GetMetricsResponse(metricValues=[item])

        return await self._unary("GetMetrics", request.scaledObjectRef, context, answer)

    async def IsActive(self, request: pb.ScaledObjectRef, context: Context) -> pb.IsActiveResponse:
        async def answer(query: ScalerQuery) -> pb.IsActiveResponse:
            return pb.IsActiveResponse(result=await self._active(query))

        return await self._unary("IsActive", request, context, answer)

    async def StreamIsActive(
        self, request: pb.ScaledObjectRef, context: Context
    ) -> AsyncIterator[pb.IsActiveResponse]:
        method = "StreamIsActive"
        try:
            query = self._query(request)
            async for active in activity.changes(
                lambda: self._active(query), self.refresh_interval, self.closing
            ):
                yield pb.IsActiveResponse(result=active)
        except AdapterError as error:
            await self._abort(method, request, context, error)
        except asyncio.CancelledError:
            self._count(method, grpc.StatusCode.CANCELLED)  # the client went away
            raise
        except Exception:
            await self._internal(method, context)
        # Counted before the generator returns, i.e. before gRPC sends the final status.
        self._count(method, grpc.StatusCode.OK)

    async def StreamMetricSpec(
        self, request: pb.ScaledObjectRef, context: Context
    ) -> AsyncIterator[pb.GetMetricSpecResponse]:
        self._count("StreamMetricSpec", grpc.StatusCode.UNIMPLEMENTED)
        # Specs change only with the ScaledObject, which KEDA watches itself; it polls GetMetricSpec.
        await context.abort(
            grpc.StatusCode.UNIMPLEMENTED, "StreamMetricSpec is not implemented; poll GetMetricSpec"
        )
        yield pb.GetMetricSpecResponse()  # pragma: no cover - unreachable: abort raises

    # --- shared steps ---------------------------------------------------------------------------

    def _query(self, ref: pb.ScaledObjectRef) -> ScalerQuery:
        return metadata.parse(ref.namespace, ref.scalerMetadata)

    async def _served(self, query: ScalerQuery) -> float:
        value = await self.provider.get(query.metric, query.namespace, query.selector)
        return values.served(value.value)

    async def _active(self, query: ScalerQuery) -> bool:
        return await self._served(query) > query.activation_target

    async def _unary(
        self,
        method: str,
        ref: pb.ScaledObjectRef,
        context: Context,
        answer: Callable[[ScalerQuery], Awaitable[T]],
    ) -> T:
        started = time.monotonic()
        try:
            response = await answer(self._query(ref))
        except AdapterError as error:
            await self._abort(method, ref, context, error, started)
            raise  # unreachable: abort raises
        except Exception:
            await self._internal(method, context, started)
            raise
        self._count(method, grpc.StatusCode.OK, started)
        return response

    def _count(self, method: str, code: grpc.StatusCode, started: float | None = None) -> None:
        # Always before the status leaves: a client that has its answer can read the counter.
        calls = self._calls.get((method, code))
        if calls is None:
            calls = self._calls[method, code] = self.telemetry.grpc_calls.labels(method, code.name)
        calls.inc()
        if started is not None:
            seconds = self._seconds.get(method)
            if seconds is None:
                seconds = self._seconds[method] = self.telemetry.grpc_seconds.labels(method)
            seconds.observe(time.monotonic() - started)

    async def _internal(self, method: str, context: Context, started: float | None = None) -> None:
        log.exception("unhandled error serving %s", method)
        self._count(method, grpc.StatusCode.INTERNAL, started)
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error serving {method}")

    async def _abort(
        self,
        method: str,
        ref: pb.ScaledObjectRef,
        context: Context,
        error: AdapterError,
        started: float | None = None,
    ) -> None:
        code = status.code_of(error)
        metric = ref.scalerMetadata.get(metadata.METRIC, "")
        # Alerts read this counter (serving stale data, ...) whichever front end the failure left by;
        # unknown names are folded into one label value, as the HTTP API does.
        self.telemetry.errors.labels(
            metric if self.provider.serves(metric) else "<unknown>", error.label
        ).inc()
        self._count(method, code, started)
        log.log(
            logging.WARNING
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL)
            else logging.INFO,
            "keda %s failed: %s",
            method,
            error,
            extra={
                "method": method,
                "scaled_object": f"{ref.namespace[:64]}/{ref.name[:253]}",
                "metric": metric[:64],
                "code": code.name,
                "reason": error.label,
            },
        )
        await context.abort(
            code,
            status.details_of(error, metric[:64]),
            trailing_metadata=((status.REASON_KEY, error.label),),
        )
