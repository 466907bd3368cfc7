"""What a rule is: a recording rule, an alert carrying the full contract (STYLE rule 10), a group.

The alert modules (`serving`, `queues`, `hpa`, `pipeline`) build these; `alerts.rules` assembles them
and writes the Prometheus rule-file structure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

#: the runbook, linked from every alert and from the dashboards
RUNBOOK_URL: Final = "https://github.com/vllm-autoscale/vllm-autoscale/blob/main/alerts/runbook.md"


def runbook_url(alert: str = "") -> str:
    """The runbook, or the section of `alert` (the anchor GitHub gives a heading is its lowercased text)."""
    return f"{RUNBOOK_URL}#{alert.lower()}" if alert else RUNBOOK_URL


Severity = Literal["page", "ticket"]


@dataclass(frozen=True)
class Recording:
    """A recording rule."""

    record: str
    expr: str


@dataclass(frozen=True)
class Alert:
    """An alerting rule with the full contract: severity, summary, description and runbook link."""

    alert: str
    expr: str
    for_: str
    severity: Severity
    summary: str
    description: str

    @property
    def runbook_url(self) -> str:
        """The runbook section of this alert."""
        return runbook_url(self.alert)


@dataclass(frozen=True)
class Group:
    """A rule group."""

    name: str
    rules: tuple[Recording | Alert, ...]
