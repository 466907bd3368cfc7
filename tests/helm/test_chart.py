"""The chart as a whole: lint, Kubernetes schemas for every scenario, values documentation."""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.helm.conftest import CHART, REPO, SCENARIOS, Rendered, helm_binary

#: kinds from CRDs, which kubernetes-validate cannot check (their tests check them structurally)
CRD_KINDS = {
    "PodMonitor",
    "ServiceMonitor",
    "PrometheusRule",
    "Certificate",
    "Issuer",
    "ScaledObject",
    "TriggerAuthentication",
}
#: keys whose contents are Kubernetes objects passed through verbatim: documented by Kubernetes
PASSTHROUGH_KEYS = {
    "nodeSelector",
    "tolerations",
    "affinity",
    "resources",
    "behavior",
    "podSecurityContext",
    "securityContext",
}


def _lint(scenario: str | None) -> subprocess.CompletedProcess[str]:
    args = [helm_binary(), "lint", "--strict", str(CHART)]
    if scenario:
        args += ["--values", str(CHART / "ci" / f"{scenario}-values.yaml")]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def test_lint_strict_passes() -> None:
    """`helm lint --strict` accepts the chart with its default values and with every scenario."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip([None, *SCENARIOS], pool.map(_lint, [None, *SCENARIOS]), strict=True))
    for scenario, proc in results.items():
        assert proc.returncode == 0, (
            f"helm lint --strict ({scenario or 'defaults'}):\n{proc.stdout}{proc.stderr}"
        )


def test_scenarios_cover_the_issue() -> None:
    """The ci/ scenarios include the seven situations the chart must support."""
    assert set(SCENARIOS) >= {
        "single-model",
        "two-models-pools",
        "scrape-source",
        "prometheus-cert-manager",
        "keda-apiservice",
        "scale-to-zero",
        "keda-scaler",
    }


@pytest.mark.parametrize(
    "version", [pytest.param("1.29.0", id="kubernetes 1.29"), pytest.param("1.37.0", id="kubernetes 1.37")]
)
def test_every_scenario_validates_against_kubernetes_schemas(
    version: str, rendered: dict[str, Rendered], tmp_path: Path
) -> None:
    """Every object of every scenario passes `kubernetes-validate
    --strict`; CRD kinds are checked elsewhere."""
    validator = REPO / ".venv" / "bin" / "kubernetes-validate"
    assert validator.is_file(), "kubernetes-validate is not installed: run `make tools`"
    files = []
    for name, result in rendered.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(result.text, encoding="utf-8")
        files.append(path)
    proc = subprocess.run(
        [str(validator), "--strict", "-k", version, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = proc.stdout + proc.stderr
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    assert proc.returncode == 0 and not errors, "\n".join(errors) or output
    short = version.rsplit(".", 1)[0]
    for name, result in rendered.items():
        for doc in result.docs:
            if doc["kind"] in CRD_KINDS:
                continue
            passed = (
                f"{name}.yaml passed for resource {doc['kind'].lower()}/{doc['metadata']['name']} "
                f"against version {short}"
            )
            assert passed in output, f"{doc['kind']}/{doc['metadata']['name']} of {name} was not validated"


def test_every_scenario_prometheusrule_passes_promtool(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    """kubernetes-validate skips CRDs: the spec of each scenario's PrometheusRule (with that scenario's
    params, such as the DLQ expression) goes through `promtool check rules` instead."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: apt-get install prometheus (see TOOLS.md)"
    checked = []
    for name, result in rendered.items():
        for rule in result.find("PrometheusRule"):
            path = tmp_path / f"{name}-{rule['metadata']['name']}.yaml"
            path.write_text(yaml.safe_dump(rule["spec"]), encoding="utf-8")
            checked.append(str(path))
    assert len(checked) >= len(SCENARIOS) - 1  # the scrape-source scenario has no Prometheus
    proc = subprocess.run(
        [promtool, "check", "rules", *checked], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _undocumented_keys(text: str) -> list[str]:
    """Keys of values.yaml without a `# --` comment, outside lists and pass-through Kubernetes objects."""
    missing: list[str] = []
    stack: list[tuple[int, str, bool]] = []  # (indent, key, exempt) of the open mappings
    comment_block: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            comment_block = []
            continue
        if stripped.startswith("#"):
            comment_block.append(stripped)
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        match = re.match(r"^(\s*)([A-Za-z0-9_.\-/\"]+):(\s|$)", line)
        if match is None or stripped.startswith("- "):
            # A list item: its contents are data, not documented keys.
            stack.append((indent, "-", True))
            comment_block = []
            continue
        key = match.group(2)
        exempt = any(e for _, _, e in stack)
        if not exempt and not any(c.startswith("# --") for c in comment_block):
            missing.append(".".join([k for _, k, _ in stack] + [key]))
        stack.append((indent, key, exempt or key in PASSTHROUGH_KEYS))
        comment_block = []
    return missing


def test_every_value_is_documented() -> None:
    """Every key of values.yaml carries a helm-docs `# --` comment (rule 12)."""
    assert _undocumented_keys((CHART / "values.yaml").read_text(encoding="utf-8")) == []


def test_undocumented_key_is_detected() -> None:
    """The documentation check itself finds a key without `# --`, but not inside pass-through objects."""
    text = "# -- doc\na:\n  b: 1\n  # -- doc\n  resources:\n    cpu: 1\n"
    assert _undocumented_keys(text) == ["a.b"]


def test_every_template_is_rendered_by_some_scenario(rendered: dict[str, Rendered]) -> None:
    """Each of our templates produces output in at least one scenario, so the tests above cover it."""
    sources = {
        match.group(1)
        for result in rendered.values()
        for match in re.finditer(r"^# Source: vllm-autoscale/templates/(\S+)$", result.text, re.MULTILINE)
    }
    ours = {p.name for p in (CHART / "templates").glob("*.yaml")}
    assert ours - sources == set()
