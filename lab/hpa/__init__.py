"""A model of the Kubernetes HPA controller for `External` metrics (autoscaling/v2).

It reproduces what `pkg/controller/podautoscaler` does on every sync of one HorizontalPodAutoscaler,
in modules named after what they model:

* `features`: what the cluster's Kubernetes version turns on (`HPAScaleToZero`, `HPAConfigurableTolerance`);
* `spec`: the HorizontalPodAutoscaler spec (targets as `Quantity.MilliValue()`, `behavior` and the
  defaults of `pkg/apis/autoscaling/v2/defaults.go`, the API server's validation);
* `replicas`: one metric's proposal (`replica_calculator.go`, Value vs AverageValue);
* `proposals`: all metrics together (`computeReplicasForMetrics`);
* `behavior`: stabilization windows and rate policies;
* `status`: the HPA's conditions;
* `controller`: the sync loop (`reconcileAutoscaler`: zero replicas, min/max, rescale).

Metric values are milli-units, as the controller reads them, so rounding matches the real one.
"""

from lab.hpa.behavior import Recommendation, ScaleEvent
from lab.hpa.controller import ControllerSettings, HorizontalController, SyncResult
from lab.hpa.features import DEFAULT_VERSION, ClusterFeatures, cluster_features
from lab.hpa.replicas import (
    Items,
    MetricError,
    Proposal,
    Reading,
    Scale,
    Tolerances,
    external_metric_replicas,
    external_proposal,
)
from lab.hpa.spec import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Behavior,
    ExternalMetric,
    HPASpec,
    OtherMetric,
    PolicyType,
    ScalingPolicy,
    ScalingRules,
    SelectPolicy,
    TargetType,
    admit,
    milli_value,
    with_defaults,
)
from lab.hpa.status import Condition

__all__ = [
    "DEFAULT_SCALE_DOWN",
    "DEFAULT_SCALE_UP",
    "DEFAULT_VERSION",
    "Behavior",
    "ClusterFeatures",
    "Condition",
    "ControllerSettings",
    "ExternalMetric",
    "HPASpec",
    "HorizontalController",
    "Items",
    "MetricError",
    "OtherMetric",
    "PolicyType",
    "Proposal",
    "Reading",
    "Recommendation",
    "Scale",
    "ScaleEvent",
    "ScalingPolicy",
    "ScalingRules",
    "SelectPolicy",
    "SyncResult",
    "TargetType",
    "Tolerances",
    "admit",
    "cluster_features",
    "external_metric_replicas",
    "external_proposal",
    "milli_value",
    "with_defaults",
]
