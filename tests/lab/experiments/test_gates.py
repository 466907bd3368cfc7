"""The evidence gates: a difference counts only beyond both spreads and the tolerance."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.experiments.catalog import Catalog, parse
from lab.experiments.gates import Spread, compare, false_finding, judge, of_bands, rule
from lab.experiments.measure import Cost, Repeat
from lab.experiments.record import Record, markdown, write
from lab.experiments.runner import Outcome
from lab.experiments.search import Band


def catalog(*names: str) -> Catalog:
    return parse(
        {
            "engine": {"command": "serve --port {port}", "model": "m"},
            "variants": [{"name": n} for n in ("baseline", *names)],
            "workload": {"prompt_tokens": 100, "output_tokens": 10},
            "slo": {"ttft": "1s", "tpot": "100ms"},
            "seeds": [0, 1, 2],
            "questions": {"cost": {"rate": 2}},
        }
    )


def repeats(
    knees: list[tuple[float, float]], saturated: list[float], cost: float = 0.5, held: bool = True
) -> list[Repeat]:
    return [
        Repeat(
            seed,
            saturated=s,
            knee=Band(k, f, True, True),
            knee_cost=Cost(k, cost, True, 1.0),
            rate_cost=Cost(2.0, cost, held, 1.0 if held else 0.5),
            complete=True,
        )
        for seed, ((k, f), s) in enumerate(zip(knees, saturated, strict=True))
    ]


BASE = repeats([(4.0, 4.3), (4.1, 4.4), (4.05, 4.35)], [4.6, 4.7, 4.65])


@pytest.mark.parametrize(
    ("base", "variant", "expected"),
    [
        pytest.param(Spread(10, 9, 11, 2), Spread(13, 12, 14, 2), "better", id="clear of the band above"),
        pytest.param(Spread(10, 9, 11, 2), Spread(7, 6, 8, 2), "worse", id="clear of the band below"),
        pytest.param(Spread(10, 9, 11, 2), Spread(11.5, 10.5, 12, 2), "level", id="overlapping bands"),
        pytest.param(
            Spread(10, 10, 10, 2), Spread(10.2, 10.1, 10.3, 2), "level", id="apart but within the tolerance"
        ),
    ],
)
def test_compare(base: Spread, variant: Spread, expected: str) -> None:
    assert compare(base, variant, 0.03, higher_is_better=True) == expected


def test_lower_is_better_for_a_cost() -> None:
    assert (
        compare(Spread(1.0, 0.9, 1.1, 2), Spread(0.5, 0.45, 0.55, 2), 0.03, higher_is_better=False)
        == "better"
    )


def test_a_band_spread_is_the_union_of_the_seeds_bands() -> None:
    spread = of_bands([Band(4.0, 4.3, True, True), Band(4.2, 4.6, True, False)])
    assert spread == Spread(4.1, 4.0, 4.6, 2)


def verdicts(
    measured: dict[str, list[Repeat]], blocked: dict[str, str] | None = None
) -> dict[tuple[str, str], str]:
    rows = judge(catalog(*(n for n in measured if n != "baseline")), measured, blocked or {})
    return {(r.question, r.variant): r.verdict for r in rows}


def test_each_verdict_of_the_issue() -> None:
    measured = {
        "baseline": BASE,
        "bigger": repeats([(6.0, 6.3), (6.1, 6.4), (6.05, 6.35)], [6.8, 6.9, 6.85], cost=0.3),
        "smaller": repeats([(2.0, 2.3), (2.1, 2.4), (2.05, 2.35)], [2.5, 2.6, 2.55], cost=0.9),
        "same": repeats([(4.1, 4.4), (3.9, 4.2), (4.0, 4.3)], [4.6, 4.8, 4.7]),
        "mixed": repeats([(6.0, 6.3), (6.1, 6.4), (6.05, 6.35)], [3.0, 3.1, 3.05]),
        "cheap-but-slow": repeats(
            [(4.0, 4.3), (4.1, 4.4), (4.05, 4.35)], [4.6, 4.7, 4.65], cost=0.2, held=False
        ),
    }
    got = verdicts(
        {**measured, "broken": []},
        {"broken": "the engine exited with code 2\nerror: unrecognized arguments: --x"},
    )
    assert got[("capacity", "baseline")] == "reference"
    assert got[("capacity", "bigger")] == "supported" and got[("cost", "bigger")] == "supported"
    assert got[("capacity", "smaller")] == "rejected" and got[("cost", "smaller")] == "rejected"
    assert got[("capacity", "same")] == "open"
    assert got[("capacity", "mixed")] == "caveated"
    assert got[("cost", "cheap-but-slow")] == "caveated"
    assert got[("capacity", "broken")] == "blocked"


def test_a_blocked_row_gives_the_logs_last_line() -> None:
    rows = judge(
        catalog("broken"),
        {"baseline": BASE},
        {"broken": "exited with code 2\n...\nunrecognized arguments: --x"},
    )
    row = next(r for r in rows if r.variant == "broken")
    assert row.why == "exited with code 2: unrecognized arguments: --x"


@pytest.mark.parametrize("seeds", [1, 2])
def test_fewer_than_three_complete_seeds_are_too_few_to_judge(seeds: int) -> None:
    got = verdicts({"baseline": BASE, "half": repeats([(9.0, 9.5)] * seeds, [10.0] * seeds)})
    assert got[("capacity", "half")] == "open"


def test_a_seed_that_failed_or_did_not_finish_is_kept_but_not_judged() -> None:
    """Three seeds far above the baseline, one of which failed: two complete, too few to judge."""
    mine = repeats([(9.0, 9.5)] * 3, [10.0] * 3)
    mine[1].complete, mine[1].failed = False, "the engine completed nothing at saturation"
    mine[2].complete = False
    assert verdicts({"baseline": BASE, "half": mine})[("capacity", "half")] == "open"


def test_without_a_baseline_nothing_is_judged() -> None:
    rows = judge(catalog("other"), {"other": BASE}, {"baseline": "out of memory"})
    assert {r.variant: r.verdict for r in rows} == {"baseline": "blocked", "other": "open"}


def test_the_record_says_each_row_and_draws_the_bands(tmp_path: Path) -> None:
    c = catalog("bigger")
    measured = {"baseline": BASE, "bigger": repeats([(6.0, 6.3), (6.1, 6.4), (6.05, 6.35)], [6.8, 6.9, 6.85])}
    outcomes = {
        n: Outcome(n, "serve --port {port}", tmp_path / f"{n}.log", "done", "gpu 0", 90.0, None, r)
        for n, r in measured.items()
    }
    record = Record(
        c,
        outcomes,
        judge(c, measured, {}),
        "vllm-autoscale experiment c.yaml",
        ("gpu 0", "gpu 1"),
        600.0,
        stopped="the run was stopped before every variant was measured",
    )
    text = markdown(record)
    assert "**Partial record**" in text
    assert (
        "| capacity | bigger | knee 6.05 req/s/GPU (6-6.4, "
        "3 seeds) better than 4.05 req/s/GPU (4-4.4, 3 seeds)" in text
    )
    written = write(tmp_path / "out", record)
    assert {p.name for p in written} == {"experiment.md", "experiment.json", "experiment.png"}
    assert (tmp_path / "out" / "experiment.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(("seeds", "rate"), [(2, 1 / 3), (3, 1 / 10), (4, 1 / 35)])
def test_the_false_finding_rate_is_what_identical_engines_show(seeds: int, rate: float) -> None:
    """Two configurations that are the same engine: 20,000 trials of n seeds a side, drawn from one
    skewed distribution; the share whose ranges are disjoint (a finding by luck) is 2/C(2n, n)."""
    import random

    draw = random.Random(7)
    trials = 20_000
    disjoint = 0
    for _ in range(trials):
        a = [draw.lognormvariate(0, 0.3) for _ in range(seeds)]
        b = [draw.lognormvariate(0, 0.3) for _ in range(seeds)]
        disjoint += max(a) < min(b) or max(b) < min(a)
    assert false_finding(seeds) == pytest.approx(rate)
    assert disjoint / trials == pytest.approx(rate, abs=4 * (rate * (1 - rate) / trials) ** 0.5)


def test_the_record_prints_the_rule_and_its_error_rate(tmp_path: Path) -> None:
    assert "2/C(6,3) = 10.0% a count" in rule(3) and "fewer than 3 complete seeds" in rule(3)
