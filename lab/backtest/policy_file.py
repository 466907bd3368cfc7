"""Policies from a YAML file, read strictly: an unknown key or metric is an error naming where it is.

```yaml
defaults:                 # optional; any policy key, applied to every policy below
  max_replicas: 12
  cold_start: 90
baselines: true           # add the utilisation HPA, the fixed fleet and the foresight bound (default)
policies:
  - name: inflight-6
    metric: vllm_requests_inflight      # one of lab.backtest.policy.METRICS
    target_type: AverageValue           # or Value
    target: 6
    min_replicas: 1
    behavior:                           # as in the HPA manifest
      scaleDown: {stabilizationWindowSeconds: 120, policies: [{type: Pods, value: 1, periodSeconds: 60}]}
    pipeline: prometheus                # or scrape, or {interval: 15, lag: 30}
    smoothing: 30s                      # the adapter averages the gauges over 30 s (a duration; default off)
  - name: saturation
    metric: vllm_saturation
    target_type: Value
    target: 1
    saturation: {capacity: 20, kv_target: 0.9}
  - name: anticipate
    metric: vllm_request_rate_forecast  # the request rate one sync period plus one cold start ahead
    target: 1.0                         # the knee's rate per replica / (1 + tolerance)
    forecast: {horizon: 75, window: 60} # optional: default horizon sync_period + cold_start, window 60
    guard: {metric: vllm_requests_inflight, target_type: AverageValue, target: 16}   # a second metric
```
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import yaml

from lab.backtest.policy import FORECAST, METRICS, PIPELINES, Forecast, Guard, Pipeline, Policy, Saturation
from lab.hpa import Behavior, ScalingPolicy, ScalingRules
from lab.units import duration

_POLICY_KEYS: Final = (
    "name",
    "metric",
    "target_type",
    "target",
    "min_replicas",
    "max_replicas",
    "behavior",
    "cold_start",
    "pipeline",
    "sync_period",
    "tolerance",
    "downscale_stabilization",
    "saturation",
    "forecast",
    "guard",
    "smoothing",
)
_TOP_KEYS: Final = ("defaults", "baselines", "policies")


class PolicyFileError(ValueError):
    """A policy file that cannot be used; the message names the file and the key path."""


def _keys(where: str, data: Any, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise PolicyFileError(f"{where} must be a mapping")
    for key in data:
        if key not in allowed:
            raise PolicyFileError(f"{where} key {key!r} is not known; keys are {list(allowed)}")
    return data


def _number(where: str, value: Any, *, integer: bool = False) -> Any:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise PolicyFileError(f"{where} {value!r} must be {'an integer' if integer else 'a number'}")
    return value


def _seconds(where: str, value: Any) -> float:
    """A duration: `30s`, `2m`, `500ms` (the adapter's grammar), or a bare number of seconds; 0 is off."""
    if isinstance(value, str):
        if value.strip() in ("0", "0s"):
            return 0.0
        try:
            return duration(value)
        except argparse.ArgumentTypeError as exc:
            raise PolicyFileError(f"{where} {value!r}: {exc}") from None
    seconds = float(_number(where, value))
    if seconds < 0:
        raise PolicyFileError(f"{where} {value!r} must be a duration such as 30s, or 0 (off)")
    return seconds


def _scaling_policy(where: str, data: Any) -> ScalingPolicy:
    entry = _keys(where, data, ("type", "value", "periodSeconds"))
    missing = [k for k in ("type", "value", "periodSeconds") if k not in entry]
    if missing:
        raise PolicyFileError(f"{where} needs key {missing[0]!r}")
    if entry["type"] not in ("Pods", "Percent"):
        raise PolicyFileError(f"{where}.type {entry['type']!r} must be one of ['Pods', 'Percent']")
    return ScalingPolicy(
        entry["type"],
        _number(f"{where}.value", entry["value"], integer=True),
        _number(f"{where}.periodSeconds", entry["periodSeconds"], integer=True),
    )


def _rules(where: str, data: Any) -> ScalingRules:
    rules = _keys(where, data, ("stabilizationWindowSeconds", "selectPolicy", "policies", "tolerance"))
    policies = None
    if "policies" in rules:
        if not isinstance(rules["policies"], list):
            raise PolicyFileError(f"{where}.policies must be a list")
        policies = tuple(
            _scaling_policy(f"{where}.policies[{i}]", p) for i, p in enumerate(rules["policies"])
        )
    select = rules.get("selectPolicy")
    if select is not None and select not in ("Max", "Min", "Disabled"):
        raise PolicyFileError(f"{where}.selectPolicy {select!r} must be one of ['Max', 'Min', 'Disabled']")
    window = rules.get("stabilizationWindowSeconds")
    tolerance = rules.get("tolerance")
    return ScalingRules(
        stabilization_window_seconds=None if window is None else _number(f"{where}.stabilizationWindowSeconds", window, integer=True),
        select_policy=select,
        policies=policies,
        tolerance=None if tolerance is None else float(_number(f"{where}.tolerance", tolerance)),
    )  # fmt: skip


def _behavior(where: str, data: Any) -> Behavior:
    behavior = _keys(where, data, ("scaleUp", "scaleDown"))
    up, down = behavior.get("scaleUp"), behavior.get("scaleDown")
    return Behavior(
        scale_up=None if up is None else _rules(f"{where}.scaleUp", up),
        scale_down=None if down is None else _rules(f"{where}.scaleDown", down),
    )


def _pipeline(where: str, data: Any) -> Pipeline:
    if isinstance(data, str):
        if data not in PIPELINES:
            raise PolicyFileError(f"{where} {data!r} must be one of {list(PIPELINES)} or {{interval, lag}}")
        return PIPELINES[data]
    fields = _keys(where, data, ("interval", "lag"))
    return Pipeline(
        float(_number(f"{where}.interval", fields.get("interval", 1.0))),
        float(_number(f"{where}.lag", fields.get("lag", 1.0))),
    )


def policy_from(where: str, data: Mapping[str, Any], base: Policy) -> Policy:
    """One policy entry over `base` (the defaults)."""
    entry = _keys(where, data, _POLICY_KEYS)
    changes: dict[str, Any] = {}
    for key, value in entry.items():
        path = f"{where}.{key}"
        if key == "metric":
            if value not in METRICS:
                raise PolicyFileError(f"{path} {value!r} must be one of {list(METRICS)}")
            changes[key] = value
        elif key == "target_type":
            if value not in ("AverageValue", "Value"):
                raise PolicyFileError(f"{path} {value!r} must be one of ['AverageValue', 'Value']")
            changes[key] = value
        elif key == "name":
            changes[key] = str(value)
        elif key in ("min_replicas", "max_replicas"):
            changes[key] = _number(path, value, integer=True)
        elif key == "behavior":
            changes[key] = _behavior(path, value)
        elif key == "pipeline":
            changes[key] = _pipeline(path, value)
        elif key == "saturation":
            sat = _keys(path, value, ("capacity", "kv_target", "queue_target"))
            if "capacity" not in sat:
                raise PolicyFileError(f"{path}.capacity is required (in-flight requests per pod at the knee)")
            changes[key] = Saturation(
                float(_number(f"{path}.capacity", sat["capacity"])),
                None
                if sat.get("kv_target") is None
                else float(_number(f"{path}.kv_target", sat["kv_target"])),
                None
                if sat.get("queue_target") is None
                else float(_number(f"{path}.queue_target", sat["queue_target"])),
            )
        elif key == "forecast":
            fields = _keys(path, value, ("horizon", "window"))
            if "horizon" not in fields:
                raise PolicyFileError(
                    f"{path}.horizon is required (seconds: one sync period plus one cold start)"
                )
            changes[key] = Forecast(
                float(_number(f"{path}.horizon", fields["horizon"])),
                float(_number(f"{path}.window", fields.get("window", 60.0))),
            )
        elif key == "smoothing":
            changes[key] = _seconds(path, value)
        elif key == "guard":
            fields = _keys(path, value, ("metric", "target_type", "target"))
            if fields.get("metric") not in METRICS or "target" not in fields:
                raise PolicyFileError(f"{path} needs a metric (one of {list(METRICS)}) and a target")
            kind = fields.get("target_type", "AverageValue")
            if kind not in ("AverageValue", "Value"):
                raise PolicyFileError(f"{path}.target_type {kind!r} must be one of ['AverageValue', 'Value']")
            changes[key] = Guard(fields["metric"], kind, float(_number(f"{path}.target", fields["target"])))
        else:
            changes[key] = float(_number(path, value))
    metric = changes.get("metric", base.metric)
    if metric == FORECAST and "forecast" not in changes and base.forecast is None:
        cold, sync = changes.get("cold_start", base.cold_start), changes.get("sync_period", base.sync_period)
        changes["forecast"] = Forecast(horizon=cold + sync)
    try:
        return replace(base, **changes)
    except ValueError as exc:
        raise PolicyFileError(f"{where}: {exc}") from exc


def load_policies(path: Path, base: Policy) -> tuple[list[Policy], bool]:
    """The file's policies (over `base` and the file's `defaults`) and whether to add the baselines."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise PolicyFileError(f"unable to read policy file {path}: {' '.join(str(exc).split())}") from exc
    top = _keys(f"policy file {path}", data, _TOP_KEYS)
    entries = top.get("policies")
    if not isinstance(entries, list) or not entries:
        raise PolicyFileError(f"policy file {path} key 'policies' must be a non-empty list")
    defaults = top.get("defaults", {})
    if "name" in (defaults or {}):
        raise PolicyFileError(f"policy file {path} defaults.name is not allowed (every policy names itself)")
    with_defaults = policy_from(
        f"policy file {path} defaults", defaults or {}, replace(base, name="defaults")
    )
    policies = []
    for index, entry in enumerate(entries):
        where = f"policy file {path} policies[{index}]"
        if not isinstance(entry, Mapping) or "name" not in entry:
            raise PolicyFileError(f"{where} must be a mapping with a 'name'")
        policies.append(policy_from(where, entry, with_defaults))
    names = [p.name for p in policies]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise PolicyFileError(f"policy file {path} names policy {duplicate!r} twice")
    baselines = top.get("baselines", True)
    if not isinstance(baselines, bool):
        raise PolicyFileError(f"policy file {path} key 'baselines' {baselines!r} must be true or false")
    return policies, baselines
