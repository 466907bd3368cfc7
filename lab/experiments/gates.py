"""The evidence gates: each variant's answer to each question judged against the baseline's spread.

Every count carries the spread of its repeats (the seeds): a value measured by a search is the union
of its bands ([lowest end that held, highest end that failed) over the seeds), any other value the
range of the seeds' values. A count is **better** or **worse** than the baseline's only when the two
spreads do not overlap and they differ by more than `Measure.tolerance` of the baseline; otherwise
it is **level**. A row (one question of one variant) is then, in the decision record's vocabulary:

* **supported**: better on a count and worse on none, and the SLO held where it was measured;
* **rejected**: worse on a count and better on none;
* **open**: level on every count (the bands overlap), or fewer than `MIN_SEEDS` complete repeats on
  either side to judge;
* **caveated**: better on one count but worse on another, or cheaper per request while missing the
  SLO where the baseline met it;
* **blocked**: the engine would not start or could not be measured (the reason is its log's end);
* **stopped**: the run was stopped before the variant was measured (never run, still waiting for a
  GPU) or while it was (its finished seeds are in the record, not judged);
* **reference**: the baseline's own row, the numbers the others are judged against.

**How often the rule finds a difference that is not there.** Take two configurations that are the
same engine: their n and m seeds are then exchangeable draws of one distribution, whatever that
distribution is. The two ranges are disjoint exactly when every draw of one side lies below every
draw of the other; of the C(n+m, n) equally likely ways the sides interleave, two do that, so a
count is called better or worse by chance with probability at most `2 / C(n+m, n)` (`false_finding`):
1/3 for two seeds a side, 1/10 for three, 1/35 for four. The tolerance only lowers it further. A
searched count's spread (the union of bands) is wider than its values', so its rate is lower still.
A row reads two counts off the same seeds; by the union bound its false rate is at most twice a
count's (a row of identical engines is `open` at least 80 % of the time with three seeds, and the
counts are correlated, so the truth is nearer 90 %).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from lab.backtest import decision
from lab.experiments.catalog import MIN_SEEDS, Catalog
from lab.experiments.measure import Repeat
from lab.experiments.search import Band, significant

Verdict = Literal["supported", "rejected", "open", "caveated", "blocked", "stopped", "reference"]
# The decision record's words (`lab.backtest.decision`), and the three an engine's run adds.
VERDICTS: Final = (*decision.VERDICTS, "caveated", "blocked", "stopped")


def false_finding(seeds: int, baseline_seeds: int | None = None) -> float:
    """The chance that two identical configurations' ranges of `seeds` and `baseline_seeds` draws are
    disjoint (a count judged better or worse by luck): 2 / C(n+m, n). See the module's argument."""
    m = seeds if baseline_seeds is None else baseline_seeds
    return min(1.0, 2 / math.comb(seeds + m, seeds))


def rule(seeds: int) -> str:
    """The gate's rule and its error rate, as the record prints it."""
    return (
        f"A count is a finding only when the {seeds} seeds' range of the variant and of the baseline do not "
        "overlap and differ by more than the tolerance. For "
        "two configurations that are the same engine this "
        "happens by chance with probability at most "
        f"2/C({2 * seeds},{seeds}) = {false_finding(seeds):.1%} a count "
        f"({min(1.0, 2 * false_finding(seeds)):.0%} a row of "
        "two counts), whatever the distribution of the seeds' "
        f"values; fewer than {MIN_SEEDS} complete seeds on either side give no finding (open)."
    )


Direction = Literal["better", "worse", "level"]
QUESTIONS: Final = ("capacity", "cost", "boundary-prompt", "boundary-rate")


@dataclass(frozen=True)
class Spread:
    """A count over the repeats: its mean, and the range the repeats (and their bands) span."""

    value: float
    low: float
    high: float
    repeats: int

    def text(self, unit: str) -> str:
        return (
            f"{significant(self.value)} {unit} "
            f"({significant(self.low)}-{significant(self.high)}, {self.repeats} seeds)"
        )


def of_values(values: Sequence[float]) -> Spread | None:
    return Spread(statistics.fmean(values), min(values), max(values), len(values)) if values else None


def of_bands(bands: Sequence[Band]) -> Spread | None:
    """The bands' lower ends (what held) on average, and their union."""
    if not bands:
        return None
    return Spread(
        statistics.fmean(b.held for b in bands),
        min(b.held for b in bands),
        max(b.failed for b in bands),
        len(bands),
    )


def compare(base: Spread, variant: Spread, tolerance: float, higher_is_better: bool) -> Direction:
    """Better or worse only beyond both spreads and the tolerance; level otherwise."""
    margin = tolerance * abs(base.value)
    if variant.low > base.high and variant.value - base.value > margin:
        return "better" if higher_is_better else "worse"
    if variant.high < base.low and base.value - variant.value > margin:
        return "worse" if higher_is_better else "better"
    return "level"


@dataclass(frozen=True)
class Count:
    """One number of a row: the baseline's and the variant's spreads, and how they compare."""

    name: str
    unit: str
    baseline: Spread | None
    variant: Spread | None
    direction: Direction | None
    """`None` where either side was not measured."""

    def text(self) -> str:
        def side(s: Spread | None) -> str:
            return "not measured" if s is None else s.text(self.unit)

        verb = {"better": "better than", "worse": "worse than", "level": "level with", None: "vs"}[
            self.direction
        ]
        return f"{self.name} {side(self.variant)} {verb} {side(self.baseline)}"


@dataclass(frozen=True)
class Row:
    """One question asked of one variant, its numbers, its verdict and why."""

    question: str
    variant: str
    counts: tuple[Count, ...]
    verdict: Verdict
    why: str


Extract = Callable[[Repeat], float | Band | None]
# Per question: (count name, unit, how to read it off a repeat, higher is better).
_COUNTS: Final[dict[str, tuple[tuple[str, str, Extract, bool], ...]]] = {
    "capacity": (
        ("knee", "req/s/GPU", lambda r: r.knee, True),
        ("saturated", "req/s/GPU", lambda r: r.saturated, True),
    ),
    "cost": (
        (
            "at the knee",
            "GPU-s/good request",
            lambda r: r.knee_cost.gpu_seconds if r.knee_cost else None,
            False,
        ),
        (
            "at the fixed rate",
            "GPU-s/good request",
            lambda r: r.rate_cost.gpu_seconds if r.rate_cost else None,
            False,
        ),
    ),
    "boundary-prompt": (("prompt boundary", "tokens", lambda r: r.prompt_boundary, True),),
    "boundary-rate": (("rate boundary", "req/s/GPU", lambda r: r.rate_boundary, True),),
}
_PER_GPU: Final = {"req/s/GPU"}


def spread_of(repeats: Sequence[Repeat], extract: Extract, per: float = 1.0) -> Spread | None:
    """A count's spread over the repeats that measured it (`per`: divide by the GPUs of an engine)."""
    found = [x for x in (extract(r) for r in repeats) if x is not None]
    bands = [b for b in found if isinstance(b, Band)]
    values = [v / per for v in found if not isinstance(v, Band)]
    if bands:
        return of_bands(
            [Band(b.held / per, b.failed / per, b.held_measured, b.failed_measured) for b in bands]
        )
    return of_values(values)


def asked(catalog: Catalog, question: str, variant: str) -> bool:
    if question == "capacity":
        return catalog.capacity
    if question == "cost":
        return catalog.capacity or catalog.cost_rate is not None
    boundary = catalog.boundary
    if boundary is None or variant not in boundary.variants:
        return False
    return (boundary.prompt if question == "boundary-prompt" else boundary.rate) is not None


def judge(
    catalog: Catalog,
    measured: dict[str, list[Repeat]],
    blocked: dict[str, str],
    stopped: dict[str, str] | None = None,
) -> list[Row]:
    """Every asked question of every variant, the baseline's rows first (as `reference`). Only complete
    seeds are judged; `stopped` names the variants a stopped run left unmeasured, with why."""
    rows = []
    complete = {name: [r for r in repeats if r.complete] for name, repeats in measured.items()}
    base = complete.get(catalog.baseline, [])
    for variant in sorted(catalog.variants, key=lambda v: v.name != catalog.baseline):
        for question in QUESTIONS:
            if not asked(catalog, question, variant.name):
                continue
            row = _row(catalog, question, variant.name, base, complete.get(variant.name, []), blocked)
            if stopped and variant.name in stopped and variant.name not in blocked:
                row = Row(question, variant.name, row.counts, "stopped", stopped[variant.name])
            rows.append(row)
    return rows


def _row(
    catalog: Catalog,
    question: str,
    name: str,
    base: list[Repeat],
    mine: list[Repeat],
    blocked: dict[str, str],
) -> Row:
    gpus = catalog.engine.gpus
    counts = []
    for count, unit, extract, higher in _COUNTS[question]:
        per = gpus if unit in _PER_GPU else 1
        b, v = spread_of(base, extract, per), spread_of(mine, extract, per)
        direction = None if b is None or v is None else compare(b, v, catalog.measure.tolerance, higher)
        counts.append(Count(count, unit, b, v, direction))
    numbers = "; ".join(c.text() for c in counts)
    if name in blocked:
        # the reason's first line, and the log's last line: where vLLM says what it refused
        lines = blocked[name].splitlines()
        why = lines[0] if len(lines) < 2 else f"{lines[0]}: {lines[-1].strip()}"
        return Row(question, name, tuple(counts), "blocked", why)
    if name == catalog.baseline:
        return Row(
            question,
            name,
            tuple(counts),
            "reference",
            "the baseline: the numbers the others are judged against",
        )
    if catalog.baseline in blocked:
        return Row(
            question,
            name,
            tuple(counts),
            "open",
            f"no baseline to judge against ({catalog.baseline} is blocked)",
        )
    judged = [c for c in counts if c.direction is not None]
    fewest = min(
        (min(c.baseline.repeats, c.variant.repeats) for c in judged if c.baseline and c.variant), default=0
    )
    if not judged or fewest < MIN_SEEDS:
        return Row(
            question,
            name,
            tuple(counts),
            "open",
            f"too few complete seeds to judge (the gate needs {MIN_SEEDS} a side): {numbers}",
        )
    better = [c.name for c in judged if c.direction == "better"]
    worse = [c.name for c in judged if c.direction == "worse"]
    missed = _missed_slo(catalog, question, base, mine)
    if better and (worse or missed):
        against = ", ".join(worse) + (" and " if worse and missed else "") + (missed or "")
        return Row(
            question,
            name,
            tuple(counts),
            "caveated",
            f"better on {', '.join(better)} but worse on {against}: {numbers}",
        )
    if better:
        return Row(question, name, tuple(counts), "supported", f"beyond the spread of both: {numbers}")
    if worse:
        return Row(question, name, tuple(counts), "rejected", f"worse beyond the spread of both: {numbers}")
    return Row(question, name, tuple(counts), "open", f"within the spread (the bands overlap): {numbers}")


def _missed_slo(catalog: Catalog, question: str, base: list[Repeat], mine: list[Repeat]) -> str | None:
    """Where the variant missed the SLO at the fixed rate while the baseline met it (cost only)."""
    if question != "cost":
        return None
    held = [r.rate_cost.held for r in mine if r.rate_cost is not None]
    base_held = [r.rate_cost.held for r in base if r.rate_cost is not None]
    if held and base_held and all(base_held) and not all(held):
        return f"the SLO at {catalog.cost_rate:g} req/s (missed in {held.count(False)} of {len(held)} seeds)"
    return None
