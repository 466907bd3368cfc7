"""Roles of disaggregated serving: which pods prefill and which decode, told apart by a pod label.

Disaggregated (P/D) fleets run prefill engines and decode engines of one model as two pools, told
apart by a label on their pods (llm-d's `llm-d.ai/role=prefill|decode` by default; KServe's or any
other key in configuration, `roles`). A metric bound to a role (`MetricDef.role`) reads only the
pods of that role: the request's selector gets the role's requirement added (`bind`), so the HPA's
selector names the model and the adapter the pool. On Prometheus the role must be a label of the
series (the key mapped as any selector key: `llm-d.ai/role` → `llm_d_ai_role`, copied from the pod
by the ServiceMonitor's or PodMonitor's relabeling); on the scrape source it is a target label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from adapter.errors import RoleConflict
from adapter.vocabulary.label_keys import prometheus_label_name
from adapter.vocabulary.selectors import Operator, Requirement, Selector

#: llm-d's role label and values, the defaults (the chart labels its pods with them)
DEFAULT_KEY: Final = "llm-d.ai/role"
PREFILL: Final = "prefill"
DECODE: Final = "decode"


@dataclass(frozen=True)
class Role:
    """One pool of a P/D fleet: `name` is what the adapter calls it (`prefill` or `decode`), `key` and
    `value` the pod label that marks it."""

    name: str
    key: str = DEFAULT_KEY
    value: str = ""

    def __post_init__(self) -> None:
        if not self.value:
            object.__setattr__(self, "value", self.name)

    @property
    def requirement(self) -> Requirement:
        """`key=value` as a selector requirement."""
        return Requirement(self.key, Operator.EQUALS, (self.value,))

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


def bind(selector: Selector, role: Role, metric: str) -> Selector:
    """`selector` with the role's requirement added; `RoleConflict` (400) when the selector itself
    excludes the role (`llm-d.ai/role=decode` for a prefill metric): that request can only be a mistake,
    and answering it with the other pool's numbers would scale one pool on the other's load."""
    label = prometheus_label_name(role.key)
    for requirement in selector.requirements:
        if prometheus_label_name(requirement.key) == label and not requirement.matches(
            {requirement.key: role.value}
        ):
            raise RoleConflict(
                f"{metric} reads the {role.name} pool ({role}), which the selector's {requirement} excludes; "
                f"leave the role out of the selector or select {role}"
            )
    wanted = role.requirement
    if wanted in selector.requirements:
        return selector
    ordered = sorted({*selector.requirements, wanted}, key=lambda r: (r.key, r.operator.value, r.values))
    return Selector(tuple(ordered))
