"""What an autoscaling/v2 HorizontalPodAutoscaler says, for `External` metrics: the spec the controller reads.

Quantities are parsed by the server's one parser (`adapter.vocabulary.quantity`) and read as the controller
reads them (`Quantity.MilliValue()`); a partly written `behavior` is completed as the API server's
defaulting does (`pkg/apis/autoscaling/v2/defaults.go`).
Specs the API server would reject are rejected here, naming the rule they break (`validation.go`);
the one rule that depends on the cluster's feature gates is `admit`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields, replace
from decimal import MAX_EMAX, MIN_EMIN, ROUND_UP, localcontext
from typing import Final, Literal

from adapter.vocabulary.quantity import parse_decimal
from lab.hpa.features import ClusterFeatures

PolicyType = Literal["Pods", "Percent"]
OtherMetricType = Literal["Resource", "ContainerResource", "Pods", "Object"]
SelectPolicy = Literal["Max", "Min", "Disabled"]
TargetType = Literal["Value", "AverageValue"]

# The API server's limits in validation.go validateScalingRules.
_MAX_PERIOD_SECONDS: Final = 1800
_MAX_WINDOW_SECONDS: Final = 3600


def milli_value(quantity: str | float) -> int:
    """`resource.Quantity.MilliValue()`: the value in milli-units, rounded up as Kubernetes does.

    A fraction of a milli-unit rounds away from zero (`int64Amount.AsScaledInt64`): 0.1m reads as
    1m, -0.1m as -1m. A value whose milli-units do not fit the controller's int64 (beyond about
    9.2P) is refused with `ValueError`, where the controller's arithmetic would overflow.
    """
    if type(quantity) is float and math.isfinite(quantity):
        fast = _plain_milli(repr(quantity))
        if fast is not None:
            return fast
    number = parse_decimal(quantity if isinstance(quantity, str) else repr(quantity))
    # Bound the magnitude before scaling: an exponent can be huge ("1e999999999").
    if number and number.adjusted() + 3 >= len(str(_INT64_MAX)):
        raise _beyond_int64(quantity)
    # scaleb keeps every digit and a tiny exponent ("1e-999999999") in range: the rounding is exact.
    with localcontext(prec=len(number.as_tuple().digits), Emin=MIN_EMIN, Emax=MAX_EMAX):
        milli = int(number.scaleb(3).to_integral_value(rounding=ROUND_UP))
    if not -_INT64_MAX - 1 <= milli <= _INT64_MAX:
        raise _beyond_int64(quantity)
    return milli


_INT64_MAX: Final = 2**63 - 1


def _plain_milli(text: str) -> int | None:
    """`milli_value` of a float's `repr` in plain notation (`-12.3456`), by its digits: exact, as the
    decimal path is, and four times faster (a backtest reads a metric hundreds of thousands of
    times). `None` for an exponent (`1e-05`) or a value beyond int64: the decimal path decides."""
    if "e" in text or "n" in text:  # 1e-05, inf, nan
        return None
    negative = text.startswith("-")
    whole, _, fraction = text.removeprefix("-").partition(".")
    milli = int(whole) * 1000 + int(fraction[:3].ljust(3, "0"))
    if fraction[3:].strip("0"):
        milli += 1  # a fraction of a milli-unit rounds away from zero
    if milli > _INT64_MAX:
        return None
    return -milli if negative else milli


def _beyond_int64(quantity: str | float) -> ValueError:
    return ValueError(
        f"quantity {quantity!r} is beyond the int64 of milli-units the HPA controller reads with "
        f"MilliValue() (at most {_INT64_MAX}m)"
    )


@dataclass(frozen=True)
class ScalingPolicy:
    """One `HPAScalingPolicy`: at most `value` pods (or percent) of change per `period_seconds`."""

    type: PolicyType
    value: int
    period_seconds: int


@dataclass(frozen=True)
class ScalingRules:
    """One direction of `behavior` (`HPAScalingRules`); `None` fields take the API defaults."""

    stabilization_window_seconds: int | None = None
    select_policy: SelectPolicy | None = None
    policies: tuple[ScalingPolicy, ...] | None = None
    tolerance: float | None = None
    """Per-direction tolerance (`HPAConfigurableTolerance`); `None` is the controller's flag."""


@dataclass(frozen=True)
class Behavior:
    """`spec.behavior`: scale-up and scale-down rules."""

    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None


#: `defaults.go` defaultHPAScaleUpRules: no window, the larger of +4 pods and +100 % every 15 s
DEFAULT_SCALE_UP: Final = ScalingRules(
    stabilization_window_seconds=0,
    select_policy="Max",
    policies=(ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)),
)
#: `defaults.go` defaultHPAScaleDownRules: the window comes from the controller flag (300 s by default)
DEFAULT_SCALE_DOWN: Final = ScalingRules(select_policy="Max", policies=(ScalingPolicy("Percent", 100, 15),))


def _complete(rules: ScalingRules | None, defaults: ScalingRules) -> ScalingRules:
    """`copyHPAScalingRules`: every field the user set wins over the default."""
    if rules is None:
        return defaults
    chosen = {f.name: getattr(rules, f.name) for f in fields(rules) if getattr(rules, f.name) is not None}
    return replace(defaults, **chosen)


def with_defaults(behavior: Behavior) -> Behavior:
    """A `behavior` completed as the API server's defaulting does
    (`SetDefaults_HorizontalPodAutoscalerBehavior`)."""
    return Behavior(
        _complete(behavior.scale_up, DEFAULT_SCALE_UP), _complete(behavior.scale_down, DEFAULT_SCALE_DOWN)
    )


@dataclass(frozen=True)
class ExternalMetric:
    """One `type: External` entry of `spec.metrics`."""

    name: str
    target_type: TargetType
    target: str
    """The target as a quantity (`"24"`, `"800m"`); `value` or `averageValue` per `target_type`."""
    selector: str = ""
    """`metric.selector` as a label selector string (`model_name=llama`)."""

    @functools.cached_property
    def target_milli(self) -> int:
        """The target as the controller reads it (`MilliValue()`); read at every sync, parsed once."""
        return milli_value(self.target)


@dataclass(frozen=True)
class OtherMetric:
    """A `spec.metrics` entry of another type, which the model does not compute: its reading is the
    replica count its own calculation proposed (or why it failed).

    It matters for what the controller decides around zero: only Object and External metrics can
    scale a workload to and from 0 replicas."""

    type: OtherMetricType
    name: str

    @property
    def failure_reason(self) -> str:
        """The `ScalingActive` reason when this metric cannot be computed (`FailedGetResourceMetric`, ...)."""
        return f"FailedGet{self.type}Metric"


@dataclass(frozen=True)
class HPASpec:
    """The parts of a HorizontalPodAutoscaler spec the controller reads."""

    max_replicas: int
    metrics: tuple[ExternalMetric, ...]
    min_replicas: int = 1
    """0 needs an External or Object metric, and the API server's `HPAScaleToZero` gate (`admit`)."""
    behavior: Behavior | None = None
    """`None` selects the controller's legacy path, as in
    Kubernetes; a partial one is completed with defaults."""
    other_metrics: tuple[OtherMetric, ...] = ()
    """Metrics of other types; they come after `metrics` in `spec.metrics` (and in a sync's readings)."""

    @property
    def all_metrics(self) -> tuple[ExternalMetric | OtherMetric, ...]:
        """`spec.metrics` in order: one sync reading per entry."""
        return (*self.metrics, *self.other_metrics)

    @property
    def has_object_or_external(self) -> bool:
        """`hasObjectOrExternalMetrics`: a metric that still exists when no pod does."""
        return bool(self.metrics) or any(m.type == "Object" for m in self.other_metrics)

    def __post_init__(self) -> None:
        if not self.all_metrics:
            raise ValueError("hpa spec 'metrics' must name at least one metric")
        if self.min_replicas < 0 or self.max_replicas < max(1, self.min_replicas):
            raise ValueError(
                f"hpa spec replicas min {self.min_replicas} max {self.max_replicas} must satisfy "
                "0 <= minReplicas <= maxReplicas and maxReplicas >= 1"
            )
        if self.min_replicas == 0 and not self.has_object_or_external:
            raise ValueError(
                "hpa spec 'metrics' must specify at least one Object or External metric "
                "to support scaling to zero replicas (minReplicas: 0)"
            )
        for metric in self.metrics:
            if metric.target_milli <= 0:
                raise ValueError(f"hpa metric {metric.name!r} target {metric.target!r} must be positive")
        for rules in (self.behavior.scale_up, self.behavior.scale_down) if self.behavior else ():
            if rules is not None:
                _validate_rules(rules)


def _validate_rules(rules: ScalingRules) -> None:
    window = rules.stabilization_window_seconds
    if window is not None and not 0 <= window <= _MAX_WINDOW_SECONDS:
        raise ValueError(
            f"hpa scaling rules stabilizationWindowSeconds {window} must be between 0 and "
            f"{_MAX_WINDOW_SECONDS}"
        )
    if rules.tolerance is not None and rules.tolerance < 0:
        raise ValueError(f"hpa scaling rules tolerance {rules.tolerance} must be greater than or equal to 0")
    if rules.policies == ():
        raise ValueError("hpa scaling rules 'policies' must specify at least one policy when set")
    for policy in rules.policies or ():
        if policy.value <= 0 or not 0 < policy.period_seconds <= _MAX_PERIOD_SECONDS:
            raise ValueError(
                f"hpa scaling policy {policy!r} must have value > 0 and "
                f"0 < periodSeconds <= {_MAX_PERIOD_SECONDS}"
            )


def admit(spec: HPASpec, api_server: ClusterFeatures) -> None:
    """The one feature-gated rule of the API server's validation: `minReplicas: 0` is admitted only
    with `HPAScaleToZero` on (at the kube-apiserver, whose gates may differ from the controller's).
    Raises `ValueError` naming the gate and the version it is on by default from."""
    if spec.min_replicas == 0 and not api_server.scale_to_zero:
        raise ValueError(
            f"hpa spec minReplicas 0 needs the HPAScaleToZero feature gate, off by default before "
            f"Kubernetes 1.37 (cluster is {api_server.name}); enable it or set minReplicas >= 1"
        )
