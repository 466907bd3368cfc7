"""The HPA's side of `external.metrics.k8s.io`: GET a metric and read it as the controller does.

Mirrors `pkg/controller/podautoscaler/metrics/client.go` (`externalMetricsClient.GetExternalMetric`):
list the metric in the HPA's namespace with the metric's label selector, fail on an error status or
an empty item list, and read every item with `Quantity.MilliValue()`; the replica calculator then
sums the items. Any failure becomes a `MetricError`, which the controller model treats as the real
one treats a failed fetch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Final
from urllib.parse import quote

import aiohttp

from lab.hpa import ExternalMetric, MetricError, Reading, milli_value

GROUP_VERSION: Final = "external.metrics.k8s.io/v1beta1"


class ExternalMetricsClient:
    """Reads External metrics from an adapter's HTTP API in one namespace."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        namespace: str,
        *,
        timeout: float = 5.0,
        rates: Mapping[str, float] | None = None,
    ) -> None:
        self.session = session
        self.rates = dict(rates or {})
        """Metrics served per second of a clock this many times slower than the HPA's: their values are
        divided by it (the demo's adapter runs on the event loop's clock, the HPA on the emulated one)."""
        self.base_url = base_url.rstrip("/")
        self.namespace = namespace
        self.timeout = aiohttp.ClientTimeout(total=timeout)

    def url(self, metric: ExternalMetric) -> str:
        """The request URL, `labelSelector` included when the metric has a selector."""
        url = f"{self.base_url}/apis/{GROUP_VERSION}/namespaces/{quote(self.namespace)}/{quote(metric.name)}"
        return f"{url}?labelSelector={quote(metric.selector)}" if metric.selector else url

    async def get(self, metric: ExternalMetric) -> int:
        """The metric's items summed in milli-units; raises `MetricError` where the HPA would see an error."""
        try:
            async with self.session.get(self.url(metric), timeout=self.timeout) as response:
                body = await response.json(content_type=None)
                if response.status != 200:
                    reason = body.get("reason", "") if isinstance(body, dict) else ""
                    raise MetricError(
                        f"unable to fetch metrics from external metrics API: {response.status} "
                        f"{reason}".rstrip()
                    )
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise MetricError(f"unable to fetch metrics from external metrics API: {exc!r}") from exc
        items = body.get("items") if isinstance(body, dict) else None
        if not items:
            raise MetricError("no metrics returned from external metrics API")
        try:
            total = sum(milli_value(str(item["value"])) for item in items)
        except (KeyError, TypeError, ValueError) as exc:
            raise MetricError(f"unable to read external metric value: {exc}") from exc
        return round(total / self.rates.get(metric.name, 1.0))

    async def readings(self, metrics: Sequence[ExternalMetric]) -> list[Reading]:
        """One reading per metric, fetched concurrently; failures are returned, not raised."""

        async def one(metric: ExternalMetric) -> Reading:
            try:
                return await self.get(metric)
            except MetricError as error:
                return error

        return list(await asyncio.gather(*(one(m) for m in metrics)))
