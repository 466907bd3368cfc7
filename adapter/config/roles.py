"""The `roles` section and the role-bound metrics of disaggregated (P/D) fleets.

`roles` names the pod label that tells a fleet's prefill pods from its decode pods (llm-d's
`llm-d.ai/role` by default; KServe's or any key of your own); the metrics bound to a role read that
label's value for it (`adapter.vocabulary.roles`). `vllm_prefill_backlog_seconds` exists once its
measured prefill throughput is configured, as `vllm_saturation` does once its capacity is.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adapter.errors import ConfigError, InvalidSelector
from adapter.vocabulary import disaggregated, roles
from adapter.vocabulary.catalogue import DEFAULT_WINDOW_SECONDS, MetricDef
from adapter.vocabulary.label_keys import check_key, check_value, prometheus_label_name

if TYPE_CHECKING:
    from adapter.config.metrics import MetricSettings


@dataclass(frozen=True)
class RoleSettings:
    """Disaggregated serving: the pod label telling prefill pods
    from decode pods (docs/metrics.md "Prefill and decode apart")."""

    label: str = roles.DEFAULT_KEY
    """Pod label key holding the role (llm-d's by default; KServe's, or one of your own). On
    Prometheus the series carry it as `llm_d_ai_role` (`.`, `/`, `-` → `_`), copied by relabeling."""
    prefill: str = roles.PREFILL
    """The label's value on prefill pods; `vllm_prefill_backlog_seconds` reads only these."""
    decode: str = roles.DECODE
    """The label's value on decode pods; `vllm_kv_fetch_requests` reads only these."""

    def check(self) -> None:
        """`ConfigError` naming the key for a label or value Kubernetes would not accept, or equal values."""
        try:
            check_key(self.label)
        except InvalidSelector as exc:
            raise ConfigError(
                f"config key 'roles.label' value {self.label!r} is not a valid label key: {exc}"
            ) from None
        for key in ("prefill", "decode"):
            value = getattr(self, key)
            try:
                check_value(self.label, value)
            except InvalidSelector as exc:
                raise ConfigError(
                    f"config key 'roles.{key}' value {value!r} is not a valid label value: {exc}"
                ) from None
            if not value:
                raise ConfigError(
                    f"config key 'roles.{key}' must not be empty: a pod without the label has no role"
                )
        if self.prefill == self.decode:
            raise ConfigError(
                f"config key 'roles.decode' value {self.decode!r} must differ from 'roles.prefill': "
                "the two pools must be told apart"
            )

    def role(self, name: str) -> roles.Role:
        """The configured `Role` called `name` (`prefill` or `decode`)."""
        return roles.Role(name, self.label, getattr(self, name))


#: labels a target has from discovery, which configured labels must not replace
_TARGET_LABELS = frozenset({"namespace", "instance", "pod", "service"})


def check_pod_labels(labels: dict[str, str], path: str) -> None:
    """`ConfigError` naming the key for a label key or value Kubernetes would not accept, or one that
    would replace a label discovery sets."""
    for key, value in labels.items():
        try:
            check_key(key)
            check_value(key, value)
        except InvalidSelector as exc:
            raise ConfigError(f"config key '{path}.{key}' is not a valid pod label: {exc}") from None
        if prometheus_label_name(key) in _TARGET_LABELS:
            raise ConfigError(
                f"config key '{path}.{key}' would replace the target label {prometheus_label_name(key)!r}, "
                f"which discovery sets; valid: any other pod label, e.g. {roles.DEFAULT_KEY}"
            )


def bound(metrics: Iterable[MetricDef], settings: RoleSettings) -> tuple[MetricDef, ...]:
    """The metrics with each role replaced by the configured one of the same name."""
    return tuple(m if m.role is None else m.with_overrides(role=settings.role(m.role.name)) for m in metrics)


def is_backlog(name: str, s: MetricSettings, base: MetricDef | None) -> bool:
    """Whether `metrics.<name>` defines a prefill backlog metric (the built-in name, or a new metric
    with a `prefill_throughput` and no query)."""
    return name == disaggregated.PREFILL_BACKLOG or (
        s.prefill_throughput is not None and base is None and s.query is None
    )


def backlog(name: str, s: MetricSettings, path: str, refresh_interval: float) -> MetricDef:
    """A prefill backlog metric from its throughput and window, each checked."""
    if s.query is not None or s.presence is not None or s.statistic is not None or s.quantile is not None:
        raise ConfigError(
            f"config key {path!r} takes only prefill_throughput and window (and the common keys): the "
            "backlog reads vLLM's gauges and prompt-token histogram itself"
        )
    if s.prefill_throughput is None:
        raise ConfigError(
            f"config key '{path}.prefill_throughput' is required: the prompt tokens per second one prefill "
            "pod computes through the P/D path (`vllm-autoscale "
            "profile` measures it), e.g. prefill_throughput: 48000"
        )
    if not (math.isfinite(s.prefill_throughput) and s.prefill_throughput > 0):
        raise ConfigError(
            f"config key '{path}.prefill_throughput' value "
            f"{s.prefill_throughput!r} must be a positive number "
            "(prompt tokens per second per pod)"
        )
    window = s.window if s.window is not None else DEFAULT_WINDOW_SECONDS
    if window < 2 * refresh_interval:
        raise ConfigError(
            f"config key '{path}.window' value {window:g}s must be at least twice the "
            f"refresh interval ({refresh_interval:g}s) for a rate to have two samples"
        )
    return disaggregated.prefill_backlog(s.prefill_throughput, window, name=name)


def without_backlog_keys(s: MetricSettings) -> MetricSettings:
    """The settings left for the common overrides once the backlog took its own window."""
    return dataclasses.replace(s, window=None)
