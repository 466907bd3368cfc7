"""The recording rules and alerts, as data: the one source of the rules file and the Helm copy.

Every tunable (threshold, `for:` duration, selector, the DLQ and queue expressions) is a field of
`alerts.params.Params`. The rules are built from a `ParamText`, each parameter already rendered as the
text the rule carries: its value for `alerts/vllm-autoscale.rules.yaml`, or a Helm lookup for the chart's
copy (`alerts.generate`).

The rules live by concern, one module each with its promtool tests in `tests/alerts/<module>-test.yaml` (A3):
`recording` (shared series), `serving` (per-model latency and capacity; the TPOT drift has its own
`tpot-drift-test.yaml`), `queues` (upstream queue and DLQ), `hpa`, and `pipeline` (the metrics path and the
adapter). Queries read the catalogue (`adapter.vocabulary.catalogue` through `adapter.vocabulary.promql`) and
are written in `adapter.vocabulary.promql`'s vocabulary with series names from `adapter.vocabulary.vllm`,
`adapter.vocabulary.exporters` (kube-state-metrics, SQS) and `adapter.telemetry` (the adapter's own), so the
alerts mean what the HPA and the dashboards mean, and a renamed series is renamed in one place.
"""

from __future__ import annotations

from typing import Final, TypedDict

from alerts import disaggregated, hpa, pipeline, queues, serving
from alerts.contract import Alert, Group, Recording
from alerts.params import Params, ParamText, plain_text
from alerts.recording import recording_rules

RULES_GROUP: Final = "vllm-autoscale.rules"
ALERTS_GROUP: Final = "vllm-autoscale.alerts"


class GroupDoc(TypedDict):
    """A rule group as written to YAML; a rule is a mapping because `for` is a Python keyword."""

    name: str
    rules: list[dict[str, object]]


class RulesDoc(TypedDict):
    groups: list[GroupDoc]


def alerting_rules(t: ParamText) -> tuple[Alert, ...]:
    """Every alert, in the order of the runbook."""
    return (
        *serving.alerts(t),
        *disaggregated.alerts(t),
        *queues.alerts(t),
        *hpa.alerts(t),
        *pipeline.alerts(t),
    )


def rule_groups(t: ParamText) -> tuple[Group, ...]:
    """Recording rules first, then alerts (which read the recordings)."""
    return (
        Group(RULES_GROUP, (*recording_rules(t), *disaggregated.recording_rules(t))),
        Group(ALERTS_GROUP, alerting_rules(t)),
    )


def build(params: Params | None = None) -> tuple[Group, ...]:
    """The rule groups with the values of `params` (the shipped defaults when omitted)."""
    return rule_groups(plain_text(params or Params()))


def to_document(groups: tuple[Group, ...]) -> RulesDoc:
    """The Prometheus rule-file structure (also a PrometheusRule's `spec`)."""
    out: list[GroupDoc] = []
    for group in groups:
        rules: list[dict[str, object]] = []
        for rule in group.rules:
            if isinstance(rule, Recording):
                rules.append({"record": rule.record, "expr": rule.expr})
            else:
                rules.append(
                    {
                        "alert": rule.alert,
                        "expr": rule.expr,
                        "for": rule.for_,
                        "labels": {"severity": rule.severity},
                        "annotations": {
                            "summary": rule.summary,
                            "description": rule.description,
                            "runbook_url": rule.runbook_url,
                        },
                    }
                )
        out.append({"name": group.name, "rules": rules})
    return {"groups": out}
