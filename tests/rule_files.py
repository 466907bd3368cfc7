"""What the alert tests share: the generated rules file, the real tools they run, the default alerts,
and the vLLM series names a text reads."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from adapter.vocabulary import vllm
from alerts import generate, rules
from alerts.contract import Alert

ROOT = Path(__file__).resolve().parent.parent
RULES_FILE = ROOT / generate.RULES_PATH
RUNBOOK = ROOT / "alerts" / "runbook.md"


def binary(name: str) -> str:
    """The path of a tool the tests need; fails loudly when it is missing."""
    path = shutil.which(name) or (str(ROOT / ".tools" / name) if (ROOT / ".tools" / name).exists() else None)
    if path is None:
        raise AssertionError(f"{name!r} is not installed; run scripts/install-tools (make tools)")
    return path


def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run a tool, capturing its output; the caller asserts on the return code."""
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False, **kwargs)


def default_alerts() -> list[Alert]:
    """Every alert with the shipped parameters."""
    return [r for g in rules.build() for r in g.rules if isinstance(r, Alert)]


def alert_names() -> list[str]:
    return sorted({a.alert for a in default_alerts()})


def vllm_family_names() -> set[str]:
    """Every vLLM series name of a family in adapter.vocabulary.vllm, aliases included."""
    return {
        name
        for value in vars(vllm).values()
        if isinstance(value, tuple)
        for name in value
        if isinstance(name, str)
    }


def vllm_names_in(text: str) -> set[str]:
    """The vLLM families a text reads (histogram suffixes stripped)."""
    return {re.sub(r"_(sum|count|bucket)$", "", name) for name in re.findall(r"vllm:[a-z_]+", text)}
