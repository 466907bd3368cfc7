"""Routing: every alert reaches the receiver its severity names through the example Alertmanager
configuration (real `amtool config routes test`), so a page wakes the pager and a ticket waits."""

from __future__ import annotations

import pytest

from alerts.contract import Alert
from tests.rule_files import ROOT, binary, default_alerts, run

EXAMPLE_AM = ROOT / "alerts" / "alertmanager.example.yaml"
#: the receiver of each severity in the example routing
RECEIVER = {"page": "pager", "ticket": "ticket"}


def _route(labels: dict[str, str]) -> str:
    """The receiver(s) amtool resolves `labels` to, as it prints them."""
    result = run(
        [
            binary("amtool"),
            "config",
            "routes",
            "test",
            f"--config.file={EXAMPLE_AM}",
            *(f"{key}={value}" for key, value in labels.items()),
        ]
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("alert", default_alerts(), ids=lambda a: f"{a.alert}-{a.severity}")
def test_every_alert_is_routed_by_its_severity(alert: Alert) -> None:
    """The alert's own labels (name, severity, a namespace, a queue) resolve to its severity's receiver."""
    labels = {"alertname": alert.alert, "severity": alert.severity, "namespace": "serving", "queue_name": "q"}
    assert _route(labels) == RECEIVER[alert.severity]


def test_routing_follows_the_severity_not_the_name() -> None:
    """The check above can fail: the same alert name with the other severity goes elsewhere."""
    assert (
        _route({"alertname": "VLLMNoReadyReplica", "severity": "ticket", "namespace": "serving"}) == "ticket"
    )
    assert _route({"alertname": "VLLMNoReadyReplica", "severity": "page", "namespace": "serving"}) == "pager"
