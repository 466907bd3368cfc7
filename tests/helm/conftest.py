"""Rendering the chart with the real helm binary, once per scenario and session.

`helm template` output is parsed into documents; tests read objects with `Rendered.one(kind, name)`.
The helm binary is found on PATH first, then at `.tools/helm` in the repository (where `make tools` puts
it); without it every chart test fails, never skips.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.certs import CA

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm"
RELEASE = "demo"
NAMESPACE = "inference"
#: the adapter's object name in every render (release "demo", chart "vllm-autoscale")
ADAPTER = f"{RELEASE}-vllm-autoscale-adapter"
#: the ci/ scenario files, by short name ("single-model" for ci/single-model-values.yaml)
SCENARIOS: tuple[str, ...] = tuple(
    sorted(path.name.removesuffix("-values.yaml") for path in (CHART / "ci").glob("*-values.yaml"))
)
#: the smallest values that deploy one autoscaled model
ONE_MODEL: dict[str, Any] = {
    "models": [{"name": "m", "model": "org/model", "autoscaling": {"maxReplicas": 3}}],
}

Doc = dict[str, Any]


def helm_binary() -> str:
    """The helm executable: PATH first, then the repository's .tools/helm; fails the test if neither."""
    found = shutil.which("helm")
    if found:
        return found
    local = REPO / ".tools" / "helm"
    if local.is_file():
        return str(local)
    pytest.fail("helm is not installed: run `make tools` (it puts helm 3 at .tools/helm)", pytrace=False)


def scenario_file(name: str) -> Path:
    return CHART / "ci" / f"{name}-values.yaml"


@dataclass(frozen=True)
class Rendered:
    """The documents `helm template` produced, and its raw output."""

    docs: tuple[Doc, ...]
    text: str

    def find(self, kind: str, name: str | None = None) -> list[Doc]:
        """Every document of `kind` (and `name`, when given)."""
        return [
            doc
            for doc in self.docs
            if doc["kind"] == kind and (name is None or doc["metadata"]["name"] == name)
        ]

    def one(self, kind: str, name: str | None = None) -> Doc:
        """The single document of `kind` (and `name`); fails the test when there is not exactly one."""
        found = self.find(kind, name)
        assert len(found) == 1, (
            f"expected one {kind} {name or ''}, found {[d['metadata']['name'] for d in found]}"
        )
        return found[0]


@dataclass(frozen=True)
class HelmResult:
    returncode: int
    stdout: str
    stderr: str

    def rendered(self) -> Rendered:
        assert self.returncode == 0, f"helm template failed:\n{self.stderr}"
        # libyaml: a render is ~500 kB (the dashboards), 0.5 s for the pure-Python parser, 0.03 s for this one
        docs = tuple(doc for doc in yaml.load_all(self.stdout, Loader=yaml.CSafeLoader) if doc)
        return Rendered(docs, self.stdout)


def helm_template(
    tmp: Path,
    *,
    files: tuple[Path, ...] = (),
    values: Mapping[str, Any] | None = None,
    extra: tuple[str, ...] = (),
    chart: Path = CHART,
) -> HelmResult:
    """Run `helm template` with values files, then `values` (written to a file in `tmp`) on top."""
    args = [helm_binary(), "template", RELEASE, str(chart), "--namespace", NAMESPACE, *extra]
    for file in files:
        args += ["--values", str(file)]
    if values is not None:
        tmp.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=tmp, suffix=".yaml", delete=False) as handle:
            yaml.safe_dump(dict(values), handle)
        path = Path(handle.name)
        args += ["--values", str(path)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    return HelmResult(proc.returncode, proc.stdout, proc.stderr)


def render(tmp: Path, values: Mapping[str, Any] | None = None, *, scenario: str | None = None) -> Rendered:
    """Render `values` (over a scenario file, if given) and fail the test if helm fails."""
    files = (scenario_file(scenario),) if scenario else ()
    return helm_template(tmp, files=files, values=values).rendered()


def render_many(
    tmp: Path, cases: Mapping[str, Mapping[str, Any]], extra: tuple[str, ...] = ()
) -> dict[str, HelmResult]:
    """Render several value sets concurrently (helm start-up dominates); results by case id."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            key: pool.submit(helm_template, tmp / key, values=values, extra=extra)
            for key, values in cases.items()
        }
        return {key: future.result() for key, future in futures.items()}


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Rendered]:
    """Every ci/ scenario rendered once per session, by short name; "defaults" is values.yaml alone."""
    tmp = tmp_path_factory.mktemp("helm")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(helm_template, tmp, files=(scenario_file(name),)) for name in SCENARIOS}
        futures["defaults"] = pool.submit(helm_template, tmp)
        return {name: future.result().rendered() for name, future in futures.items()}


def models_of(rendered: Rendered) -> Iterator[Doc]:
    """The vLLM Deployments of a render."""
    for doc in rendered.find("Deployment"):
        if doc["metadata"]["labels"].get("app.kubernetes.io/component") == "vllm":
            yield doc


def container(deployment: Doc, name: str) -> Doc:
    """The container called `name` of a Deployment."""
    containers = deployment["spec"]["template"]["spec"]["containers"]
    matches = [c for c in containers if c["name"] == name]
    assert len(matches) == 1, f"no single container {name!r} in {deployment['metadata']['name']}"
    found: Doc = matches[0]
    return found


def mounted_files(result: Rendered, tmp: Path) -> dict[str, Path]:
    """Each Secret volume of the adapter's pod as a directory holding what the kubelet would mount there
    (the rendered Secret's keys, or a certificate of a test CA for a Secret made in the cluster, such as
    cert-manager's), by mount path."""
    deployment = result.one("Deployment", ADAPTER)
    mounts = {m["name"]: m["mountPath"] for m in container(deployment, "adapter")["volumeMounts"]}
    ca = CA("stand-in")
    issued = ca.issue("stand-in", server=True)
    directories: dict[str, Path] = {}
    for volume in deployment["spec"]["template"]["spec"]["volumes"]:
        secret = volume.get("secret")
        if secret is None:
            continue
        found = result.find("Secret", secret["secretName"])
        data = (
            {key: base64.b64decode(value) for key, value in found[0]["data"].items()}
            if found
            else {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem, "ca.crt": ca.cert_pem}
        )
        items = secret.get("items") or [{"key": key, "path": key} for key in data]
        directory = tmp / volume["name"]
        directory.mkdir(parents=True)
        for item in items:
            (directory / item["path"]).write_bytes(data[item["key"]])
        directories[mounts[volume["name"]]] = directory
    return directories


@pytest.fixture(scope="session")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    """The default values with adapter.security.tls.mode
    selfSigned (no scenario uses it: test clusters only)."""
    return render(tmp_path_factory.mktemp("self-signed"), {"adapter": {"tls": {"mode": "selfSigned"}}})
