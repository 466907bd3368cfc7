"""Policies from a YAML file, read by the project's one strict reader (`adapter.config.strict`): an
unknown key, a wrong type or an impossible value (`tolerance: -1`) is one line naming the file, the key
path, the value and what is valid. Durations are `500ms`, `30s`, `2m` or a plain number of seconds.

```yaml
defaults:                 # optional; any policy key, applied to every policy below
  max_replicas: 12
  cold_start: 90s
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
    forecast: {horizon: 75s, window: 1m} # optional: default horizon sync_period + cold_start, window 60 s
    guard: {metric: vllm_requests_inflight, target_type: AverageValue, target: 16}   # a second metric
```
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import yaml

from adapter.config.strict import Reader, child
from lab.backtest.policy import FORECAST, METRICS, PIPELINES, Forecast, Guard, Pipeline, Policy, Saturation
from lab.hpa import Behavior, ScalingPolicy, ScalingRules

_TARGET_TYPES: Final = ("AverageValue", "Value")
#: policy keys read as durations: seconds, or `30s`, `2m`; `True` where 0 is allowed (off, or instant)
_DURATIONS: Final = {
    "cold_start": True,
    "sync_period": False,
    "downscale_stabilization": True,
    "smoothing": True,
}
_POLICY_KEYS: Final = (
    "name",
    "metric",
    "target_type",
    "target",
    "min_replicas",
    "max_replicas",
    "behavior",
    "pipeline",
    "tolerance",
    "saturation",
    "forecast",
    "guard",
    *_DURATIONS,
)
_TOP_KEYS: Final = ("defaults", "baselines", "policies")


class PolicyFileError(ValueError):
    """A policy file that cannot be used; the message names the file and the key path."""


#: the policy file's reader: its errors read `policy key '<path>' ...`
_READ: Final = Reader("policy", PolicyFileError)


def _scaling_policy(where: str, data: Any) -> ScalingPolicy:
    entry = _READ.mapping(where, data, ("type", "value", "periodSeconds"), ("type", "value", "periodSeconds"))
    return ScalingPolicy(
        _READ.choice(f"{where}.type", entry["type"], ("Pods", "Percent")),
        _READ.number(f"{where}.value", entry["value"], integer=True, above=0),
        _READ.number(f"{where}.periodSeconds", entry["periodSeconds"], integer=True, above=0),
    )


def _rules(where: str, data: Any) -> ScalingRules:
    rules = _READ.mapping(
        where, data, ("stabilizationWindowSeconds", "selectPolicy", "policies", "tolerance")
    )
    policies = None
    if "policies" in rules:
        entries = _READ.items(
            f"{where}.policies", rules["policies"], "a non-empty list of {type, value, periodSeconds}"
        )
        policies = tuple(_scaling_policy(f"{where}.policies[{i}]", p) for i, p in enumerate(entries))
    select = rules.get("selectPolicy")
    window = rules.get("stabilizationWindowSeconds")
    tolerance = rules.get("tolerance")
    # The window's upper bound (3600 s) is the API server's, checked with the whole HPA (`HPASpec`).
    if window is not None:
        window = _READ.number(f"{where}.stabilizationWindowSeconds", window, integer=True, at_least=0)
    if select is not None:
        select = _READ.choice(f"{where}.selectPolicy", select, ("Max", "Min", "Disabled"))
    if tolerance is not None:
        # The controller's tolerance is a share of the target; below 0 it would act on every reading.
        tolerance = float(_READ.number(f"{where}.tolerance", tolerance, at_least=0))
    return ScalingRules(window, select, policies, tolerance)


def _behavior(where: str, data: Any) -> Behavior:
    behavior = _READ.mapping(where, data, ("scaleUp", "scaleDown"))
    up, down = behavior.get("scaleUp"), behavior.get("scaleDown")
    return Behavior(
        scale_up=None if up is None else _rules(f"{where}.scaleUp", up),
        scale_down=None if down is None else _rules(f"{where}.scaleDown", down),
    )


def _pipeline(where: str, data: Any) -> Pipeline:
    if isinstance(data, str):
        if data not in PIPELINES:
            raise _READ.invalid(where, data, f"one of {list(PIPELINES)} or {{interval, lag}}")
        return PIPELINES[data]
    fields = _READ.mapping(where, data, ("interval", "lag"))
    return Pipeline(
        _READ.duration(f"{where}.interval", fields.get("interval", 1.0)),
        _READ.duration(f"{where}.lag", fields.get("lag", 1.0), zero=True),
    )


def _saturation(where: str, data: Any) -> Saturation:
    sat = _READ.mapping(where, data, ("capacity", "kv_target", "queue_target"), ("capacity",))
    kv, queue = sat.get("kv_target"), sat.get("queue_target")
    return Saturation(
        float(_READ.number(f"{where}.capacity", sat["capacity"], above=0)),
        None if kv is None else float(_READ.number(f"{where}.kv_target", kv, above=0, at_most=1)),
        None if queue is None else float(_READ.number(f"{where}.queue_target", queue, above=0)),
    )


def _forecast(where: str, data: Any) -> Forecast:
    fields = _READ.mapping(where, data, ("horizon", "window"), ("horizon",))
    return Forecast(
        _READ.duration(f"{where}.horizon", fields["horizon"]),
        _READ.duration(f"{where}.window", fields.get("window", 60.0)),
    )


def _guard(where: str, data: Any) -> Guard:
    fields = _READ.mapping(where, data, ("metric", "target_type", "target"), ("metric", "target"))
    return Guard(
        _READ.choice(f"{where}.metric", fields["metric"], METRICS),
        _READ.choice(f"{where}.target_type", fields.get("target_type", "AverageValue"), _TARGET_TYPES),
        float(_READ.number(f"{where}.target", fields["target"], above=0)),
    )


#: policy keys that are sections of their own, each with its reader
_SECTIONS: Final = {
    "behavior": _behavior,
    "pipeline": _pipeline,
    "saturation": _saturation,
    "forecast": _forecast,
    "guard": _guard,
}


def _value(path: str, key: str, value: Any) -> Any:
    """One policy key's value, read as its kind."""
    if key == "metric":
        return _READ.choice(path, value, METRICS)
    if key == "target_type":
        return _READ.choice(path, value, _TARGET_TYPES)
    if key == "name":
        return _READ.text(path, value)
    if key == "min_replicas":
        return _READ.number(path, value, integer=True, at_least=0)
    if key == "max_replicas":
        return _READ.number(path, value, integer=True, above=0)
    if key == "target":
        return float(_READ.number(path, value, above=0))
    if key == "tolerance":
        # The controller's tolerance is a share of the target; below 0 it would act on every reading.
        return float(_READ.number(path, value, at_least=0))
    if key in _DURATIONS:
        return _READ.duration(path, value, zero=_DURATIONS[key])
    return _SECTIONS[key](path, value)


def policy_from(where: str, data: Any, base: Policy) -> Policy:
    """One policy entry over `base` (the defaults); `where` is its key path in the file."""
    entry = _READ.mapping(where, data, _POLICY_KEYS)
    changes = {key: _value(child(where, key), key, value) for key, value in entry.items()}
    metric = changes.get("metric", base.metric)
    if metric == FORECAST and "forecast" not in changes and base.forecast is None:
        cold, sync = changes.get("cold_start", base.cold_start), changes.get("sync_period", base.sync_period)
        changes["forecast"] = Forecast(horizon=cold + sync)
    try:
        return replace(base, **changes)
    except ValueError as exc:
        raise _READ.fail(where, f"is not a policy to run: {exc}") from exc


def _read(data: Any, base: Policy) -> tuple[list[Policy], bool]:
    """The policies of a parsed file, and whether to add the baselines."""
    top = _READ.mapping("", data, _TOP_KEYS, ("policies",))
    entries = _READ.items("policies", top["policies"], "a non-empty list of policies")
    defaults = _READ.mapping("defaults", top.get("defaults"), _POLICY_KEYS)
    if "name" in defaults:
        raise _READ.fail("defaults.name", "is not allowed: every policy names itself")
    with_defaults = policy_from("defaults", defaults, replace(base, name="defaults"))
    policies = []
    for index, entry in enumerate(entries):
        where = f"policies[{index}]"
        _READ.mapping(where, entry, _POLICY_KEYS, ("name",))
        policies.append(policy_from(where, entry, with_defaults))
    names = [p.name for p in policies]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise _READ.fail("policies", f"names policy {duplicate!r} twice")
    return policies, _READ.flag("baselines", top.get("baselines", True))


def load_policies(path: Path, base: Policy) -> tuple[list[Policy], bool]:
    """The file's policies (over `base` and the file's `defaults`) and whether to add the baselines."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise PolicyFileError(f"unable to read policy file {path}: {' '.join(str(exc).split())}") from exc
    try:
        return _read(data, base)
    except PolicyFileError as exc:
        raise PolicyFileError(f"policy file {path}: {exc}") from exc
