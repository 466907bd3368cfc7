"""The profile file round-trips exactly and refuses files it cannot trust."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from lab.load.server import Server
from lab.load.workload import Distribution, Workload
from lab.profile.schema import (
    Estimate,
    Knee,
    MetricTarget,
    PercentileSlo,
    Profile,
    ProfileError,
    Step,
    dump,
    load,
)


def sample_profile() -> Profile:
    step = Step(
        offered_rate=4.0,
        achieved_rate=3.9,
        concurrency=12.5,
        running=12.0,
        waiting=0.5,
        kv_usage=0.41,
        preemptions=0.0,
        ttft_seconds={"p50": 0.08, "p90": 0.2},
        tpot_seconds={"p90": 0.031},
        e2e_seconds={"p90": 4.2},
        server_ttft_seconds=0.19,
        server_tpot_seconds=0.03,
        requests=240,
        queue_stable=True,
        slo_met=True,
    )
    return Profile(
        server=Server("0.26.0", "llama", 64, 9000, 16),
        workload=Workload(Distribution(512.0), Distribution(128.0, (100, 156))),
        slo=PercentileSlo(0.5, 0.05),
        steps=(step,),
        knee=Knee(4.0, 12.5, 0.41, 0.2, 0.031),
        tpot_vs_batch=((1.0, 0.012), (12.0, 0.031)),
        prefill_seconds_per_token=0.0001,
        targets={"vllm_requests_inflight": MetricTarget("AverageValue", 11.0, "0.9 x knee concurrency")},
        complete=True,
    )


def test_round_trip(tmp_path: Path) -> None:
    """What `dump` writes, `load` reads back equal, nested tuples and dicts included."""
    path = tmp_path / "profile.json"
    dump(sample_profile(), path)
    assert load(path) == sample_profile()


def test_another_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    dump(sample_profile(), path)
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match="schema_version 99"):
        load(path)


def test_a_missing_field_is_named(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    dump(sample_profile(), path)
    data = json.loads(path.read_text())
    del data["knee"]["concurrency"]
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=r"knee: field 'concurrency' is missing"):
        load(path)


def test_a_file_without_the_later_optional_fields_still_loads(tmp_path: Path) -> None:
    """Fields added since version 1 was first written have defaults: an older file reads as before."""
    path = tmp_path / "profile.json"
    dump(sample_profile(), path)
    data = json.loads(path.read_text())
    for name in ("saturated_rate", "saturation"):
        del data[name]
    del data["server"]["max_model_len"]
    for name in ("server_ttft_mean_seconds", "errors", "clients", "generation_tokens_per_second"):
        del data["steps"][0][name]
    path.write_text(json.dumps(data))
    assert load(path) == sample_profile()


def _strict(text: str) -> object:
    """JSON as jq, Go and JavaScript read it: `Infinity` and `NaN` are errors."""

    def refuse(name: str) -> object:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_an_unbounded_value_is_written_null_and_read_back_unbounded(tmp_path: Path) -> None:
    """A TTFT interval with no upper end, an estimate unbounded both ways, a percentile beyond every
    finished request: standard JSON (`null`) on disk, the same infinities after `load`."""
    base = sample_profile()
    step = dataclasses.replace(
        base.steps[0],
        ttft_seconds={"p50": 0.08, "p90": math.inf},
        ttft_interval=(0.0, math.inf),
        waiting_slope=Estimate(0.0, -math.inf, math.inf),
    )
    profile = dataclasses.replace(base, steps=(step,))
    path = tmp_path / "profile.json"
    dump(profile, path)
    written = _strict(path.read_text())
    assert isinstance(written, dict)
    assert written["steps"][0]["ttft_interval"] == [0.0, None]
    assert written["steps"][0]["waiting_slope"] == {"value": 0.0, "low": None, "high": None}
    assert load(path) == profile


def test_files_written_with_infinity_still_load() -> None:
    """Profiles checked in before the change carry a bare `Infinity`; they read as they did."""
    root = Path(__file__).resolve().parents[3]
    found = [
        p for folder in ("runs", "examples", "tests") for p in sorted((root / folder).glob("**/profile.json"))
    ]
    old = [p for p in found if "Infinity" in p.read_text()]
    assert old, "no checked-in profile with Infinity left: this test has nothing to read"
    for path in old:
        loaded = load(path)
        assert any(s.ttft_interval is not None and math.inf in s.ttft_interval for s in loaded.steps), path
