"""The catalog is read strictly: each mistake names the key path, the value and what is valid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.experiments.catalog import CatalogError, load, parse


def minimal(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "engine": {"command": "vllm serve m --port {port}", "model": "m"},
        "variants": [{"name": "baseline"}, {"name": "seqs-16", "flags": "--max-num-seqs 16"}],
        "workload": {"prompt_tokens": 1024, "output_tokens": 128},
        "slo": {"ttft": "500ms", "tpot": "50ms"},
        "seeds": [0, 1, 2],
    }
    data.update(changes)
    return data


def test_a_minimal_catalog_takes_the_defaults() -> None:
    catalog = parse(minimal())
    assert catalog.baseline == "baseline"
    assert catalog.command(catalog.variant("seqs-16")) == "vllm serve m --port {port} --max-num-seqs 16"
    assert catalog.slo.ttft_seconds == 0.5 and catalog.slo.percentile == 0.9
    assert catalog.measure.step == 15.0 and catalog.capacity and catalog.boundary is None
    assert catalog.engine.time_scale == 1.0 and catalog.engine.gpus == 1


def test_the_boundary_is_asked_of_the_baseline_unless_told() -> None:
    questions = {
        "cost": {"rate": 10},
        "boundary": {"prompt": {"rate": 8, "output_tokens": 128, "low": 256, "high": 4096}},
    }
    catalog = parse(minimal(questions=questions))
    assert catalog.cost_rate == 10
    assert catalog.boundary is not None and catalog.boundary.variants == ("baseline",)
    assert catalog.boundary.prompt is not None and catalog.boundary.prompt.steps == 4
    assert catalog.boundary.rate is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param(
            {"engine": {"command": "vllm serve m", "model": "m"}},
            r"^catalog key 'engine.command' value 'vllm serve m' must be a command with \{port\}",
            id="command without a port",
        ),
        pytest.param(
            {"seeds": [0]},
            r"^catalog key 'seeds' value \[0\] must be a list of at least 3 different seeds",
            id="one seed",
        ),
        pytest.param({"seeds": [1, 1, 2]}, "at least 3 different seeds", id="a seed twice"),
        pytest.param({"seeds": [0, 1]}, "one time in three", id="two seeds"),
        pytest.param(
            {"baseline": "nope"},
            r"'baseline' value 'nope' must be one of the variants \['baseline', 'seqs-16'\]",
            id="unknown baseline",
        ),
        pytest.param(
            {"variants": [{"name": "a"}, {"name": "a"}]}, r"names \['a'\] more than once", id="a name twice"
        ),
        pytest.param(
            {"variants": [{"name": "a b"}]}, "must be a name with no blanks", id="a name with a blank"
        ),
        pytest.param(
            {"variants": [{"name": "a", "flag": "x"}]},
            r"^catalog key 'variants\[0\].flag' is unknown; did you "
            r"mean 'flags'\? valid keys here: \['flags', 'name'\]$",
            id="unknown variant key",
        ),
        pytest.param(
            {"slo": {"ttft": "fast", "tpot": "50ms"}},
            "^catalog key 'slo.ttft' value 'fast' must be a duration such as '30s', '2m' or 15$",
            id="bad duration",
        ),
        pytest.param(
            {"slo": {"ttft": "1s", "tpot": "50ms", "percentile": 1.5}},
            "must be between 0 and 1",
            id="bad percentile",
        ),
        pytest.param(
            {"measure": {"knee_steps": 0}},
            "'measure.knee_steps' value 0 must be an integer > 0",
            id="no knee steps",
        ),
        pytest.param({"measure": {"knee_low": 0.99}}, "must be below 0.95", id="search range empty"),
        pytest.param(
            {"workload": {"prompt_tokens": 1024}},
            "^catalog key 'workload.output_tokens' is required$",
            id="half a workload",
        ),
        pytest.param(
            {"questions": {"boundary": {}}}, "must ask 'prompt', 'rate' or both", id="an empty boundary"
        ),
        pytest.param(
            {
                "questions": {
                    "boundary": {"variants": ["x"], "rate": {"prompt_tokens": 1, "output_tokens": 1}}
                }
            },
            r"'questions.boundary.variants' value \['x'\] must be a list of variants of",
            id="boundary of an unknown variant",
        ),
        pytest.param(
            {"questions": {"boundary": {"prompt": {"rate": 1, "output_tokens": 8, "low": 900, "high": 800}}}},
            r"'questions.boundary.prompt.high' value 800 must be above low \(900\)",
            id="inverted prompt range",
        ),
        pytest.param(
            {"questions": {"capacity": "yes"}}, "must be true or false", id="capacity not a boolean"
        ),
        pytest.param(
            {"extra": 1},
            r"^catalog key 'extra' is unknown; valid keys here: \['baseline', ",
            id="unknown top key",
        ),
    ],
)
def test_each_mistake_is_named(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        parse(minimal(**changes))


def test_a_workload_file_is_read_beside_the_catalog(tmp_path: Path) -> None:
    (tmp_path / "pairs.csv").write_text("prompt_tokens,output_tokens\n100,10\n300,30\n")
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(minimal(workload={"file": "pairs.csv"})))
    catalog = load(path)
    assert catalog.workload.prompt_tokens.mean == 200 and catalog.workload.output_tokens.values == (10, 30)
    assert catalog.source == str(path)


def test_a_load_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(minimal(seeds=[3])))
    with pytest.raises(CatalogError, match=rf"^{path}: catalog key 'seeds'"):
        load(path)


def test_the_real_gpu_catalog_is_valid() -> None:
    """examples/real-8b.yaml, the catalog of the GPU run, passes its own validation."""
    catalog = load(Path(__file__).resolve().parents[3] / "examples" / "real-8b.yaml")
    assert {v.name for v in catalog.variants} >= {"baseline", "seqs-16", "fp8-kv"}
    assert catalog.boundary is not None and len(catalog.seeds) >= 3


def test_an_engine_command_at_another_time_scale_than_the_catalogs_is_refused() -> None:
    """The rehearsal's own check (`lab.engine.process.time_scale_mismatch`): an emulator at 12x
    measured on a clock of 1x would read every rate 12 times off."""
    engine = {"command": "emulate --base-port {port} --time-scale 12", "model": "m"}
    with pytest.raises(CatalogError, match="runs at --time-scale 12 but the catalog at 1"):
        parse(minimal(engine=engine))
    assert parse(minimal(engine={**engine, "time_scale": 12})).engine.time_scale == 12


def test_durations_take_the_one_grammar_or_plain_seconds() -> None:
    """As in the adapter's configuration and the policy files: `500ms`, `2m`, or a YAML number of seconds."""
    catalog = parse(minimal(slo={"ttft": 0.5, "tpot": "50ms"}, measure={"step": "2m", "settle": 3}))
    assert (catalog.slo.ttft_seconds, catalog.slo.tpot_seconds) == (0.5, 0.05)
    assert (catalog.measure.step, catalog.measure.settle) == (120.0, 3.0)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param(
            {"measure": {"step": 0}},
            r"^catalog key 'measure.step' value 0 must be a positive duration$",
            id="no window",
        ),
        pytest.param(
            {"measure": {"tolerance": -0.1}},
            r"'measure.tolerance' value -0.1 must be a number >= 0$",
            id="negative tolerance",
        ),
        pytest.param(
            {"engine": {"command": "e --port {port}", "model": "m", "time_scale": float("inf")}},
            "'engine.time_scale' value inf must be a number > 0",
            id="endless time scale",
        ),
        pytest.param(
            {"seeds": [0, 1, -2]}, r"'seeds\[2\]' value -2 must be an integer >= 0", id="negative seed"
        ),
    ],
)
def test_impossible_values_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        parse(minimal(**changes))
