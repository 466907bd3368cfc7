"""The chart as a whole: lint, Kubernetes schemas for every scenario, values documentation."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import kubernetes_validate  # type: ignore[import-untyped]  # ships no type information
import pytest
import yaml

from tests.helm.conftest import CHART, SCENARIOS, Rendered, helm_binary

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
    version: str, rendered: dict[str, Rendered], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every object of every scenario passes kubernetes-validate's strict schemas (`validate(doc,
    version, strict=True)`, what its `--strict` command line calls per document); CRD kinds are
    checked elsewhere.

    Through its Python API, on the documents already parsed: its command line parses ~500 kB of YAML a
    scenario with PyYAML's pure-Python loader and reads its ~3 MB definitions file again for each
    object, 9.3 s of CPU for the ten scenarios where this takes ~1 s. The schema files are read once
    (the cache below); what validates each object is the library's own code."""
    read = functools.cache(kubernetes_validate.utils.schema_contents)
    monkeypatch.setattr(kubernetes_validate.utils, "schema_contents", read)
    validated: list[str] = []
    failures: list[str] = []
    for name, result in rendered.items():
        for doc in result.docs:
            if doc["kind"] in CRD_KINDS:
                continue
            what = f"{doc['kind']}/{doc['metadata']['name']} of {name}"
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                failures.append(f"{what}: {'.'.join(map(str, error.path))}: {error.message}")
            except kubernetes_validate.SchemaNotFoundError as error:
                failures.append(f"{what}: {error.message}")
            else:
                validated.append(what)
    assert not failures, "\n".join(failures)
    assert len(validated) == sum(
        1 for result in rendered.values() for doc in result.docs if doc["kind"] not in CRD_KINDS
    )
    assert read.cache_info().hits > 0, "every object read the schemas again"


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
