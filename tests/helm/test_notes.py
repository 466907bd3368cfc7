"""templates/NOTES.txt: what `helm install` tells the operator, including the caveats of risky choices.

`helm template` does not print NOTES, so a copy of the chart gets a probe template that renders NOTES.txt
through `tpl` into a ConfigMap.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helm.conftest import CHART, helm_template, scenario_file

PROBE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: notes-probe
data:
  notes: {{ tpl (.Files.Get "files/NOTES.txt") . | quote }}
"""


@pytest.fixture(scope="module")
def notes_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chart = tmp_path_factory.mktemp("notes") / "chart"
    shutil.copytree(CHART, chart)
    shutil.copy(CHART / "templates" / "NOTES.txt", chart / "files" / "NOTES.txt")
    (chart / "templates" / "zz-notes-probe.yaml").write_text(PROBE, encoding="utf-8")
    return chart


def _notes(chart: Path, tmp: Path, scenario: str, kube_version: str) -> str:
    result = helm_template(
        tmp,
        files=(scenario_file(scenario),),
        chart=chart,
        extra=("--kube-version", kube_version, "--show-only", "templates/zz-notes-probe.yaml"),
    ).rendered()
    notes: str = result.one("ConfigMap", "notes-probe")["data"]["notes"]
    return notes


@pytest.mark.parametrize(
    ("kube_version", "gate_hint"),
    [
        pytest.param("1.30.0", True, id="before 1.37 the gate must be enabled"),
        pytest.param("1.37.0", False, id="1.37 has it on"),
    ],
)
def test_scale_to_zero_note(kube_version: str, gate_hint: bool, notes_chart: Path, tmp_path: Path) -> None:
    """minReplicas 0 is explained: HPAScaleToZero, and on older clusters how to enable it."""
    notes = _notes(notes_chart, tmp_path, "scale-to-zero", kube_version)
    assert "HPAScaleToZero" in notes
    assert "queue_depth" in notes
    assert ("enable the gate" in notes) is gate_hint


def test_foreign_apiservice_note(notes_chart: Path, tmp_path: Path) -> None:
    """With apiService.create false the notes say the adapter is not registered and who answers HPAs."""
    notes = _notes(notes_chart, tmp_path, "keda-apiservice", "1.30.0")
    assert "NOT registered" in notes
    assert "Not autoscaled by this chart (2 replicas)" in notes


def test_keda_notes(notes_chart: Path, tmp_path: Path) -> None:
    """With autoscaler keda the notes name the gRPC address and mutual TLS, the ScaledObjects instead of
    HPAs, and scale to zero without the feature gate, woken by the upstream metric."""
    notes = _notes(notes_chart, tmp_path, "keda-scaler", "1.30.0")
    assert "KEDA scales the models" in notes
    assert "demo-vllm-autoscale-adapter.inference.svc:9443 (mutual TLS" in notes
    assert (
        "ScaledObject/demo-vllm-autoscale-batch-llm: 0..5 replicas on queue_depth, vllm_kv_cache_usage."
        in notes
    )
    assert "KEDA scales to zero 900 s after the last activity" in notes
    assert "Scaling up from zero relies on queue_depth alone" in notes
    assert "HPAScaleToZero" not in notes and "apiservice" not in notes
