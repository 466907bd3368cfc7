"""The Makefile's install stamp: `make demo` installs only when pyproject.toml changed.

Real `make` in dry-run mode (`-n` prints the commands it would run) on a copy of the Makefile and
pyproject.toml, with the stamp older or newer than the project file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _dry_run(tmp_path: Path, target: str) -> str:
    done = subprocess.run(
        ["make", "-n", target], cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_demo_installs_once_then_only_after_pyproject_changes(tmp_path: Path) -> None:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    assert "pip install" in _dry_run(tmp_path, "demo")  # a fresh clone: no stamp yet

    stamp = tmp_path / ".venv" / ".installed"
    stamp.parent.mkdir()
    stamp.touch()
    os.utime(tmp_path / "pyproject.toml", (1_000_000_000, 1_000_000_000))
    again = _dry_run(tmp_path, "demo")
    assert "pip install" not in again and "vllm-autoscale demo" in again

    os.utime(tmp_path / "pyproject.toml", None)  # edited after the install
    os.utime(stamp, (1_000_000_000, 1_000_000_000))
    assert "pip install" in _dry_run(tmp_path, "demo")
