"""Dockerfile and .dockerignore: a multi-stage build whose runtime image holds only the installed wheel.

No Docker engine runs here, so the Dockerfile is linted with hadolint, read stage by stage, and the wheel
its builder stage makes is built from exactly the files the builder COPYs.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"


@dataclass
class Stage:
    """One FROM ... block: its base image, alias and instructions (keyword, arguments)."""

    image: str
    alias: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def _stages(text: str) -> list[Stage]:
    logical = re.sub(r"\\\n", " ", text)
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            image, _, alias = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), rest).partition(
                " AS "
            )
            stages.append(Stage(image.strip(), alias.strip() or None))
        else:
            stages[-1].instructions.append((keyword, rest))
    return stages


def _tool(name: str) -> str:
    found = shutil.which(name) or (REPO / ".venv" / "bin" / name)
    if not Path(found).is_file():
        pytest.fail(f"{name} is not installed: run `make tools`", pytrace=False)
    return str(found)


def test_hadolint_is_clean() -> None:
    """hadolint finds nothing to report in the Dockerfile."""
    proc = subprocess.run(
        [_tool("hadolint"), str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_multi_stage_build_with_a_slim_non_root_runtime() -> None:
    """The wheel is built in a builder stage; the runtime stage is a slim Python image that only copies the
    installed environment from it, adds no build tools, runs as a numeric non-root user and starts the CLI."""
    stages = _stages(DOCKERFILE.read_text(encoding="utf-8"))
    assert len(stages) >= 2
    builder, runtime = stages[0], stages[-1]
    assert builder.alias == "builder"
    assert any("-m build --wheel" in run for run in builder.all("RUN"))
    assert "slim" in runtime.image or "distroless" in runtime.image
    assert runtime.all("RUN") == [], "the runtime stage must not install or compile anything"
    assert all(copy.startswith("--from=builder ") for copy in runtime.all("COPY"))
    (user,) = runtime.all("USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, f"USER {user} must be a numeric non-root id"
    (entrypoint,) = runtime.all("ENTRYPOINT")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert json.loads(entrypoint) == ["vllm-autoscale"]
    assert "vllm-autoscale" in scripts
    assert json.loads(runtime.all("CMD")[0])[0] == "serve"


def _builder_sources() -> list[str]:
    """The context paths the builder stage COPYs (without --from)."""
    sources: list[str] = []
    for copy in _stages(DOCKERFILE.read_text(encoding="utf-8"))[0].all("COPY"):
        parts = copy.split()
        if not parts[0].startswith("--from"):
            sources += [p.rstrip("/") for p in parts[:-1]]
    return sources


def test_dockerignore_admits_exactly_what_the_build_copies() -> None:
    """.dockerignore excludes everything but the sources the builder COPYs (small context, no secrets)."""
    lines = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    admitted = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert admitted == set(_builder_sources())


def test_wheel_from_the_copied_sources_holds_the_package_and_the_cli(tmp_path: Path) -> None:
    """`python -m build --wheel` over only the COPYed files yields a wheel with every module of the adapter
    package and the `vllm-autoscale` console script."""
    context = tmp_path / "context"
    context.mkdir()
    for source in _builder_sources():
        path = REPO / source
        if path.is_dir():
            shutil.copytree(path, context / source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, context / source)
    dist = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(context)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # setuptools deprecates a `project.license` table (and other old metadata) with a warning on every
    # build and install; the project's metadata is current, so none is printed.
    assert "deprecat" not in (proc.stdout + proc.stderr).lower(), proc.stdout + proc.stderr
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points_name = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = configparser.ConfigParser()
        entry_points.read_string(archive.read(entry_points_name).decode())
    modules = {p.relative_to(REPO).as_posix() for p in (REPO / "adapter").rglob("*.py")}
    assert modules <= names, f"missing from the wheel: {sorted(modules - names)}"
    assert entry_points["console_scripts"]["vllm-autoscale"] == "adapter.cli:main"
    assert not any(n.startswith(("tests/", "helm/", "dashboards/", "lab/")) for n in names)
    metadata = archive_text(wheel, ".dist-info/METADATA")
    plotting = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: matplotlib")]
    assert plotting and all('extra == "lab"' in line for line in plotting), "matplotlib must stay optional"
    _install_as_the_builder_does(wheel, tmp_path / "venv")
    # The dependencies come from this environment's site-packages on PYTHONPATH, where the editable
    # install's path hook is not processed: the lab is importable only if the wheel carried it.
    deps = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    lab = subprocess.run(
        [str(tmp_path / "venv" / "bin" / "vllm-autoscale"), "demo"],
        capture_output=True,
        text=True,
        check=False,
        env=deps,
    )
    assert lab.returncode == 2 and "part of the lab" in lab.stderr and len(lab.stderr.splitlines()) == 1


def archive_text(wheel: Path, suffix: str) -> str:
    """The text of the wheel member whose name ends with `suffix`."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(suffix))
        return archive.read(name).decode()


def _install_as_the_builder_does(wheel: Path, venv: Path) -> None:
    """The builder's venv and install steps, run here on the wheel just built: a virtualenv without pip or
    setuptools, filled by the outer pip, ends up with the package and its console script. Dependencies are
    left out (--no-deps): they come from PyPI in the image build, and this test must not download them."""
    (run,) = [r for r in _stages(DOCKERFILE.read_text(encoding="utf-8"))[0].all("RUN") if "venv" in r]
    assert "-m venv --without-pip /opt/vllm-autoscale" in run
    assert "-m pip --python /opt/vllm-autoscale/bin/python install /dist/*.whl" in run
    for args in (
        ["-m", "venv", "--without-pip", str(venv)],
        [
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
    ):
        proc = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, timeout=120, check=False
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (venv / "bin" / "vllm-autoscale").is_file()
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert (site / "adapter" / "cli.py").is_file()
    assert not list(site.glob("pip*")) and not list(site.glob("setuptools*")), (
        "build tools in the runtime venv"
    )
