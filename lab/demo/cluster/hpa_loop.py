"""The HPA in the demo: every sync period, read the scale and the metric, let the model decide, scale.

The decision is the HPA model's (`lab.hpa.HorizontalController`); the metric is read from the
adapter over HTTP as the controller reads it (`ExternalMetricsClient`); the scale it reads and sets
is the Deployment's.
"""

from __future__ import annotations

import logging
from typing import Protocol

from lab.demo.cluster.metrics_client import ExternalMetricsClient
from lab.demo.timeline import Timeline
from lab.hpa import HorizontalController, MetricError, Scale, SyncResult

log = logging.getLogger(__name__)


class ScaleTarget(Protocol):
    """What the HPA reads and sets: the demo's `Deployment`, or a rehearsal's fleet of engine processes."""

    def scale(self) -> Scale:
        """The `/scale` subresource: spec.replicas, existing and Ready replicas."""
        ...

    async def scale_to(self, replicas: int) -> None:
        """Set `spec.replicas`."""


class HPALoop:
    """One HorizontalPodAutoscaler over `deployment`; `sync` is one pass of the controller."""

    def __init__(
        self,
        controller: HorizontalController,
        client: ExternalMetricsClient,
        deployment: ScaleTarget,
        timeline: Timeline,
    ) -> None:
        self.controller = controller
        self.client = client
        self.deployment = deployment
        self.timeline = timeline
        self.reading: float | None = None
        """The first metric as last read (sum of items, in units); `None` when that read failed."""
        self.per_replica: float | None = None
        """For an AverageValue first metric, the per-replica value the last sync compared with its target
        (`status.currentMetrics`, in units); `None` for a Value target or when not computed."""
        self.results: list[SyncResult] = []

    async def sync(self) -> None:
        """One HPA sync: read the scale and the metrics, decide, scale the Deployment."""
        scale = self.deployment.scale()
        readings = await self.client.readings(self.controller.spec.metrics)
        first = readings[0]
        self.reading = None if isinstance(first, MetricError) else first / 1000
        result = self.controller.sync(self.timeline.now(), scale, readings)
        self.results.append(result)
        first_metric = self.controller.spec.metrics[0]
        current = result.current_metrics[0] if result.current_metrics else None
        self.per_replica = (
            current / 1000 if current is not None and first_metric.target_type == "AverageValue" else None
        )
        if result.error:
            log.info("hpa: %s", result.error)
        if result.rescale:
            await self.deployment.scale_to(result.desired_replicas)
