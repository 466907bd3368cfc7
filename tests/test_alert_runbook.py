"""The runbook: a complete section for every alert, and PromQL the on-call can paste as it is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from alerts import rules
from alerts.contract import Alert
from tests import rule_files
from tests.rule_files import RUNBOOK, default_alerts

RUNBOOK_PARTS = ("Meaning", "Impact", "How to confirm", "Causes", "Recovery")


def _runbook_sections() -> dict[str, str]:
    sections: dict[str, str] = {}
    current = None
    for line in RUNBOOK.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = ""
        elif current is not None:
            sections[current] += line + "\n"
    return sections


def _github_anchor(heading: str) -> str:
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


@pytest.mark.parametrize("alert", default_alerts(), ids=lambda a: f"{a.alert}-{a.severity}")
def test_every_runbook_url_points_at_a_complete_section(alert: Alert) -> None:
    """The runbook has a section whose anchor is the URL's fragment, with meaning, impact, how to confirm
    (with PromQL or kubectl in a code block), causes and recovery."""
    sections = _runbook_sections()
    anchors = {_github_anchor(h): h for h in sections}
    fragment = alert.runbook_url.split("#", 1)[1]
    assert fragment in anchors, f"runbook.md has no section for {alert.alert}"
    body = sections[anchors[fragment]]
    parts = re.split(r"^### (.+)$", body, flags=re.MULTILINE)
    found = dict(zip(parts[1::2], parts[2::2], strict=True))
    assert tuple(found) == RUNBOOK_PARTS, f"{alert.alert}: parts {tuple(found)}"
    assert all(len(text.strip()) > 40 for text in found.values()), f"{alert.alert}: an empty part"
    assert re.search(r"```(promql|sh)\n", found["How to confirm"]), f"{alert.alert}: no query or command"


RUNBOOK_PLACEHOLDERS = {
    "$NS": "serving",
    "$MODEL": "llama",
    "$HPA": "vllm-llama",
    "$POD": "llama-0",
    "$QUEUE": "orders-dlq",
}


def _runbook_promql() -> list[str]:
    """Every expression of the runbook's ```promql blocks (an indented line continues the one before),
    its placeholders filled in as the on-call would."""
    exprs: list[str] = []
    for block in re.findall(r"```promql\n(.*?)```", RUNBOOK.read_text(encoding="utf-8"), flags=re.DOTALL):
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0].isspace() and exprs:
                exprs[-1] += " " + line.strip()
            else:
                exprs.append(line.strip())
    for placeholder, value in RUNBOOK_PLACEHOLDERS.items():
        exprs = [e.replace(placeholder, value) for e in exprs]
    return exprs


def test_runbook_promql_parses(tmp_path: Path) -> None:
    """Every query the runbook tells the on-call to paste is valid PromQL (promtool parses each one as a
    rule) with no placeholder left unfilled."""
    exprs = _runbook_promql()
    assert len(exprs) > 30
    assert not [e for e in exprs if "$" in e], "a placeholder the runbook's conventions do not define"
    check = tmp_path / "runbook-queries.yaml"
    check.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": "runbook",
                        "rules": [{"record": f"runbook:q{i}", "expr": e} for i, e in enumerate(exprs)],
                    }
                ]
            }
        )
    )
    result = rule_files.run([rule_files.binary("promtool"), "check", "rules", str(check)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_runbook_promql_reads_only_series_that_exist() -> None:
    """The runbook's queries name only recording rules the rules file records, vLLM series of the known
    families (any alias) and metrics the adapter exports: a rename cannot leave a query that returns
    nothing in the middle of an incident."""
    from prometheus_client.core import Metric

    from adapter.telemetry import Telemetry

    text = " ".join(_runbook_promql())
    records = {r.record for g in rules.build() for r in g.rules if not isinstance(r, Alert)}
    used_records = set(re.findall(r"\b(?:namespace_model_name|vllm_autoscale):[a-z0-9_:]+", text))
    assert used_records and used_records <= records, sorted(used_records - records)
    used_vllm = rule_files.vllm_names_in(text)
    assert used_vllm <= rule_files.vllm_family_names(), sorted(used_vllm - rule_files.vllm_family_names())
    collected: list[Metric] = list(Telemetry().registry.collect())
    exported = {name for m in collected for name in (m.name, f"{m.name}_total", f"{m.name}_bucket")}
    used_adapter = set(re.findall(r"\bvllm_autoscale_[a-z_]+", text))
    assert used_adapter <= exported, sorted(used_adapter - exported)


def test_the_runbook_has_no_section_without_an_alert() -> None:
    """Every alert section of the runbook belongs to an existing alert (no drift after a rename)."""
    assert set(_runbook_sections()) == set(rule_files.alert_names())
