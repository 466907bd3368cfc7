"""`vllm-autoscale demo` with its defaults, as a newcomer runs it (`make demo`): the decision lab's
recommendation for the day holds the SLO, the summary sets it beside the same day backtested, and
the picture's title, the summary and the CSV give the target as one number in the cluster's units.
The run is `default_demo` (tests/integration/conftest.py), which test_readme_targets reads too.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from lab.demo.report import CSV_NAME, SUMMARY_NAME

pytestmark = pytest.mark.integration


def test_the_default_holds_the_slo(default_demo: tuple[Path, str]) -> None:
    """The issue's bar: at least 99 % of requests within TTFT 500 ms and TPOT 50 ms, with the policy
    the backtest recommended for this day (named in the summary)."""
    out, _ = default_demo
    document = json.loads((out / SUMMARY_NAME).read_text())
    assert document["summary"]["slo_attainment"] >= 0.99
    assert document["settings"]["policy"], "the default run did not play the recommendation"


def test_the_summary_sets_the_run_beside_the_same_day_backtested(default_demo: tuple[Path, str]) -> None:
    """Foresight, the utilisation HPA and the fixed peak fleet, each with SLO attainment, replica-minutes
    and the multiple of foresight's; the run's multiple is its replica-minutes over foresight's."""
    out, stdout = default_demo
    document = json.loads((out / SUMMARY_NAME).read_text())
    comparison = document["summary"]["comparison"]
    lines = {
        line.split("  ")[1].strip(): line
        for line in stdout.splitlines()
        if line.startswith("  ") and "x foresight" in line
    }
    assert set(lines) >= {"this run", "recommended", "foresight", "utilisation HPA", "fixed peak fleet"}
    foresight = comparison["foresight"]["replica_minutes"]
    run = document["summary"]["replica_minutes"]
    assert f"{run / foresight:.2f}x foresight" in lines["this run"]
    assert comparison["recommended"]["name"] == document["settings"]["policy"]
    for row in comparison["baselines"]:
        assert f"{row['replica_minutes']:.1f} replica-minutes" in lines[row["label"]]


def test_title_summary_and_csv_agree_on_the_target(default_demo: tuple[Path, str]) -> None:
    """One number in one unit: the picture's title, the summary's policy line and every CSV row give
    the first metric's target as the summary file's settings record it (per second of the cluster)."""
    out, stdout = default_demo
    document = json.loads((out / SUMMARY_NAME).read_text())
    settings = document["settings"]
    shown = (
        f"{settings['metric']} {settings['target_type']} {settings['target']:.3g} {settings['target_unit']}"
    ).rstrip()
    assert document["title"].startswith(shown + ",")
    assert document["summary"]["policy"].startswith(shown)
    assert f"policy          {shown}" in stdout
    with (out / CSV_NAME).open(newline="") as handle:
        targets = [float(row["metric_target"]) for row in csv.DictReader(handle)]
    assert targets and all(t == pytest.approx(settings["target"], rel=1e-5) for t in targets)
