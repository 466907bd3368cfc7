"""The `metrics:` section of the configuration: overrides of built-in metrics and user metrics.

Turns the settings into the catalogue the adapter serves, checking each definition: names, statistics
only on histograms, windows long enough for a rate, smoothing only on gauges and staleness limits no
shorter than the refresh interval. `vllm_saturation` exists only once its knee parameters are configured
(a capacity is never a default). A user metric's PromQL is checked by `adapter.config.user_metrics`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from adapter.config import roles
from adapter.config.typed import DURATION, DURATION_OR_OFF
from adapter.config.user_metrics import user_metric
from adapter.errors import ConfigError
from adapter.vocabulary import catalogue, disaggregated
from adapter.vocabulary.catalogue import (
    LABEL_MATCHERS,
    GaugeSpec,
    HistogramSpec,
    MetricDef,
    MetricSpec,
    PromQLSpec,
    Statistic,
)

_METRIC_NAME = re.compile(r"^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$")


@dataclass(frozen=True)
class MetricSettings:
    """Overrides for a built-in metric, or the definition of a user metric (which needs `query`)."""

    query: str | None = None
    """PromQL template; `<<.LabelMatchers>>` is replaced by the request's matchers (namespace, then
    selector). Required unless `namespaced` is false; checked with the PromQL parser at start-up."""
    presence: str | None = None
    """Series selector template whose series prove the targets exist (user metrics); also needs
    `<<.LabelMatchers>>` unless `namespaced` is false."""
    help: str | None = None
    """One sentence shown in API discovery and `query`."""
    unit: str | None = None
    """What the value counts (`messages`, `requests`, `seconds`, `ratio`)."""
    namespaced: bool | None = None
    """Whether the HPA's namespace becomes a `namespace` matcher (default true). `false` makes the
    metric cluster-wide: every namespace sees the same value; only this allows a user query without
    `<<.LabelMatchers>>`."""
    on_empty: float | Literal["error"] | None = None
    """Value of an event statistic (a rate, mean or quantile) when targets exist but the window had no
    events, or `error` to answer 503. Gauges never use it: an absent gauge is an error."""
    max_age: float | None = field(default=None, metadata=DURATION)
    """Staleness limit of this metric (default: the source's `max_age`); the age is that of the
    oldest raw sample that contributed."""
    statistic: Literal["mean", "quantile"] | None = None
    """For the latency histograms: the mean over the window, or a quantile."""
    quantile: float | None = None
    """The quantile (0 < q < 1) when `statistic` is `quantile`."""
    window: float | None = field(default=None, metadata=DURATION)
    """The rate window of a histogram statistic (at least two refresh intervals)."""
    capacity: float | None = None
    """`vllm_saturation` (or a new metric with no `query`, which becomes a saturation metric):
    requests in flight (running + waiting) per pod at the knee, from `vllm-autoscale profile`.
    Required: without it `vllm_saturation` is not served."""
    kv_target: float | None = None
    """Saturation metrics: KV-cache usage (0 < x <= 1) per pod at the knee; unset leaves the KV term out."""
    queue_target: float | None = None
    """Saturation metrics: waiting requests tolerated per pod; unset leaves the queue term out."""
    horizon: float | None = field(default=None, metadata=DURATION)
    """`vllm_request_rate_forecast`: how far ahead to forecast the request rate, one HPA sync period
    plus one cold start (e.g. `75s`). Required: without it the forecast is not served. Its `window`
    (default 60s) is the rate window; the trend compares it with the window before."""
    prefill_throughput: float | None = None
    """`vllm_prefill_backlog_seconds` (or a new metric with no `query`, which becomes a backlog metric):
    prompt tokens per second one prefill pod computes, measured through the P/D path (`vllm-autoscale
    profile`). Required: without it the backlog is not served. Its `window` (default 2m) is that of
    the mean prompt size (docs/metrics.md "Prefill and decode apart")."""
    smoothing: float | None = field(default=None, metadata=DURATION_OR_OFF)
    """Gauge metrics (requests waiting, running, in flight, KV usage, saturation, the gateway's): serve
    the mean over this window instead of the latest value; unset or `0s` is off, else at least two
    refresh intervals. The age stays that of the newest samples, so `max_age` still applies
    (docs/metrics.md "Smoothing a gauge")."""


def build_catalogue(
    settings_by_name: Mapping[str, MetricSettings],
    refresh_interval: float,
    role_settings: roles.RoleSettings | None = None,
) -> tuple[MetricDef, ...]:
    """Built-in metrics with their overrides, then user metrics, each role-bound one reading the
    configured role label; validates each definition."""
    builtins = (*catalogue.BUILTIN, *catalogue.GATEWAY, *disaggregated.DISAGGREGATED)
    metrics: dict[str, MetricDef] = {m.name: m for m in builtins}
    for name, settings in settings_by_name.items():
        path = f"metrics.{name}"
        if not _METRIC_NAME.match(name):
            raise ConfigError(
                f"config key {path!r} is not a valid metric name; use lowercase letters, digits, '_' and '-'"
            )
        base = metrics.get(name)
        metrics[name] = _apply(base, name, settings, path, refresh_interval)
    return roles.bound(metrics.values(), role_settings or roles.RoleSettings())


_KNEE_KEYS = ("capacity", "kv_target", "queue_target")


def _saturation(name: str, s: MetricSettings, path: str) -> MetricDef:
    """A saturation metric from its knee parameters, each checked."""
    if s.query is not None or s.presence is not None:
        raise ConfigError(
            f"config key '{path}.query' cannot be combined with 'capacity': a saturation metric reads "
            "vLLM's gauges itself; define a user metric with a new name for your own PromQL"
        )
    if s.capacity is None:
        raise ConfigError(
            f"config key '{path}.capacity' is required: the requests in flight per pod at the knee "
            "(`vllm-autoscale profile` measures it), e.g. capacity: 48"
        )
    for key in _KNEE_KEYS:
        value = getattr(s, key)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ConfigError(f"config key '{path}.{key}' value {value!r} must be a positive number")
    if s.kv_target is not None and s.kv_target > 1:
        raise ConfigError(
            f"config key '{path}.kv_target' value {s.kv_target!r} must be at most 1 (KV usage is a fraction)"
        )
    return catalogue.saturation(s.capacity, s.kv_target, s.queue_target, name=name)


def _forecast(name: str, s: MetricSettings, path: str, refresh_interval: float) -> MetricDef:
    """The forecast metric from its horizon and window, each checked."""
    if s.query is not None or s.presence is not None or s.statistic is not None or s.quantile is not None:
        raise ConfigError(
            f"config key {path!r} takes only horizon and window (and the common keys): the forecast "
            "reads vLLM's time-to-first-token count itself"
        )
    if s.horizon is None:
        raise ConfigError(
            f"config key '{path}.horizon' is required: one HPA "
            "sync period plus one cold start, e.g. horizon: 75s"
        )
    if not (math.isfinite(s.horizon) and s.horizon >= 0):
        raise ConfigError(f"config key '{path}.horizon' value {s.horizon!r} must be a duration of 0s or more")
    window = s.window if s.window is not None else catalogue.FORECAST_WINDOW_SECONDS
    if window < 2 * refresh_interval:
        raise ConfigError(
            f"config key '{path}.window' value {window:g}s must be at least twice the "
            f"refresh interval ({refresh_interval:g}s) for a rate to have two samples"
        )
    return catalogue.forecast(s.horizon, window, name=name)


def _apply(
    base: MetricDef | None, name: str, s: MetricSettings, path: str, refresh_interval: float
) -> MetricDef:
    """The metric `name` as `s` configures it: its definition (built-in, forecast, saturation or user
    PromQL), then the overrides every metric takes, then a histogram's statistic, quantile and window
    and a gauge's smoothing."""
    if roles.is_backlog(name, s, base):
        base, s = roles.backlog(name, s, path, refresh_interval), roles.without_backlog_keys(s)
    elif s.prefill_throughput is not None:
        raise ConfigError(
            f"config key '{path}.prefill_throughput' applies only to {disaggregated.PREFILL_BACKLOG!r} or a "
            "new metric without a query (a prefill backlog metric)"
        )
    base = _definition(base, name, s, path, refresh_interval)
    if isinstance(base.spec, HistogramSpec) and base.spec.statistic is Statistic.FORECAST:
        # The forecast's window is its own, already read and checked by _forecast.
        s = dataclasses.replace(s, window=None)
    changes = _overrides(s, path, refresh_interval)
    spec = _smoothed_spec(_histogram_spec(base.spec, s, path, refresh_interval), s, path, refresh_interval)
    if spec is not base.spec:
        changes["spec"] = spec
    return base.with_overrides(**changes)


def _definition(
    base: MetricDef | None, name: str, s: MetricSettings, path: str, refresh_interval: float
) -> MetricDef:
    """The built-in `base`, a forecast metric, a saturation metric, or a user metric from `s.query`,
    before overrides."""
    if name == catalogue.FORECAST or (s.horizon is not None and base is None and s.query is None):
        base = _forecast(name, s, path, refresh_interval)
    elif s.horizon is not None:
        raise ConfigError(
            f"config key '{path}.horizon' applies only to {catalogue.FORECAST!r} or a new metric "
            "without a query (a forecast metric)"
        )
    knee = any(getattr(s, key) is not None for key in _KNEE_KEYS)
    if name == catalogue.SATURATION or (base is None and s.query is None and knee):
        base = _saturation(name, s, path)
    elif knee:
        raise ConfigError(
            f"config key {path!r} sets capacity/kv_target/queue_target, which apply only to "
            f"{catalogue.SATURATION!r} or a new metric without a query (a saturation metric)"
        )
    if base is None:
        return user_metric(name, s, path)
    if s.query is not None or s.presence is not None:
        raise ConfigError(
            f"config key '{path}.query' cannot replace built-in "
            f"metric {name!r}; define a metric with a new name"
        )
    return base


def _overrides(s: MetricSettings, path: str, refresh_interval: float) -> dict[str, Any]:
    """The keys every metric takes: help, unit, namespaced, on_empty, max_age."""
    changes: dict[str, Any] = {}
    if s.help is not None:
        changes["help"] = s.help
    if s.unit is not None:
        changes["unit"] = s.unit
    if s.namespaced is not None:
        changes["namespaced"] = s.namespaced
    if s.on_empty is not None:
        changes["on_empty"] = None if s.on_empty == "error" else s.on_empty
    if s.max_age is not None:
        if s.max_age < refresh_interval:
            raise ConfigError(
                f"config key '{path}.max_age' value {s.max_age:g}s must be at least the refresh "
                f"interval ({refresh_interval:g}s)"
            )
        changes["max_age_seconds"] = s.max_age
    return changes


def _histogram_spec(spec: MetricSpec, s: MetricSettings, path: str, refresh_interval: float) -> MetricSpec:
    """`spec` with the statistic, quantile and window `s` sets (only a histogram takes them); `spec`
    itself when `s` sets none."""
    if all(v is None for v in (s.statistic, s.quantile, s.window)):
        return spec
    if not isinstance(spec, HistogramSpec):
        raise ConfigError(
            f"config key {path!r} sets statistic/quantile/window, which apply only to histogram "
            "metrics (vllm_tpot_seconds, vllm_ttft_seconds)"
        )
    if s.quantile is not None and not 0 < s.quantile < 1:
        raise ConfigError(
            f"config key '{path}.quantile' value {s.quantile!r} must be between 0 and 1 (exclusive)"
        )
    spec = dataclasses.replace(
        spec,
        statistic=Statistic(s.statistic) if s.statistic else spec.statistic,
        quantile=s.quantile if s.quantile is not None else spec.quantile,
        window_seconds=s.window if s.window is not None else spec.window_seconds,
    )
    if spec.window_seconds < 2 * refresh_interval:
        raise ConfigError(
            f"config key '{path}.window' value {spec.window_seconds:g}s must be at least twice the "
            f"refresh interval ({refresh_interval:g}s) for a rate to have two samples"
        )
    return spec


def _smoothed_spec(spec: MetricSpec, s: MetricSettings, path: str, refresh_interval: float) -> MetricSpec:
    """`spec` averaged over `s.smoothing` (only a gauge takes it); `spec` itself when smoothing is off."""
    if not s.smoothing:
        return spec
    key = f"{path}.smoothing"
    if isinstance(spec, PromQLSpec):
        raise ConfigError(
            f"config key {key!r} value {s.smoothing:g}s applies only to built-in gauge metrics; for user "
            "PromQL write the mean into 'query', e.g. "
            f"sum(avg_over_time(x{{{LABEL_MATCHERS}}}[{s.smoothing:g}s]))"
        )
    if not isinstance(spec, GaugeSpec):
        raise ConfigError(
            f"config key {key!r} value {s.smoothing:g}s applies only to gauge metrics (vllm_requests_*, "
            "vllm_kv_cache_usage, saturation and gateway metrics); a histogram statistic or the forecast "
            "already averages over its 'window'"
        )
    if s.smoothing < 2 * refresh_interval:
        raise ConfigError(
            f"config key {key!r} value {s.smoothing:g}s must be 0s (off) or at least twice the refresh "
            f"interval ({refresh_interval:g}s), for a mean of two samples or more"
        )
    return dataclasses.replace(spec, smoothing_seconds=s.smoothing)
