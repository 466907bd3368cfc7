"""A model of the Kubernetes HPA controller for `External` metrics (autoscaling/v2).

It reproduces what `pkg/controller/podautoscaler` does on every sync of one HorizontalPodAutoscaler,
in three modules named after what they model:

* `spec`: the HorizontalPodAutoscaler spec (targets as `Quantity.MilliValue()`, `behavior` and the
  defaults of `pkg/apis/autoscaling/v2/defaults.go`);
* `replicas`: one metric's proposal (`replica_calculator.go`, Value vs AverageValue);
* `controller`: the sync loop (`horizontal.go`: several metrics, missing metrics, stabilization,
  rate policies, min/max, scale from zero).

Metric values are milli-units, as the controller reads them, so rounding matches the real one.
"""

from adapter.hpa.controller import ControllerSettings, Decision, HorizontalController
from adapter.hpa.replicas import MetricError, Reading, Scale, Tolerances, external_metric_replicas
from adapter.hpa.spec import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Behavior,
    ExternalMetric,
    HPASpec,
    PolicyType,
    ScalingPolicy,
    ScalingRules,
    SelectPolicy,
    TargetType,
    milli_value,
    with_defaults,
)

__all__ = [
    "DEFAULT_SCALE_DOWN",
    "DEFAULT_SCALE_UP",
    "Behavior",
    "ControllerSettings",
    "Decision",
    "ExternalMetric",
    "HPASpec",
    "HorizontalController",
    "MetricError",
    "PolicyType",
    "Reading",
    "Scale",
    "ScalingPolicy",
    "ScalingRules",
    "SelectPolicy",
    "TargetType",
    "Tolerances",
    "external_metric_replicas",
    "milli_value",
    "with_defaults",
]
