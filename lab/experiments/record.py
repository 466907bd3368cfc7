"""The experiment record: Markdown for people, JSON for tools, both from one `Record`.

It sits beside the policy decision record (`lab.backtest.output.record`) and speaks its vocabulary: each row
is a question asked of a variant, the numbers with their spreads, the verdict and why. Every step
measured is kept too (`steps/<variant>.json`, the profile's `Step`), so a verdict can be re-read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from lab import json_out
from lab.experiments.catalog import Catalog
from lab.experiments.gates import VERDICTS, Row, false_finding, rule
from lab.experiments.measure import Repeat
from lab.experiments.runner import Outcome
from lab.experiments.search import Band, significant
from lab.load.workload import longest

SCHEMA_VERSION: Final = 1
MARKDOWN_NAME: Final = "experiment.md"
JSON_NAME: Final = "experiment.json"
PNG_NAME: Final = "experiment.png"

RULES: Final = (
    "Each count carries the spread of its seeds (a searched value: the union of its bands). "
    "**supported**: better than the baseline beyond both "
    "spreads (and the tolerance) on a count, worse on none; "
    "**rejected**: worse beyond both spreads, better on "
    "none; **open**: the spreads overlap, or too few seeds; "
    "**caveated**: better on one count but worse on another, or cheaper per request while missing the SLO "
    "the baseline met; **blocked**: the engine would not start or could not be measured; "
    "**stopped**: the run was stopped before the variant was measured; **reference**: the baseline."
)


def ran(outcomes: dict[str, Outcome]) -> dict[str, list[str]]:
    """What the run did, one line a variant: measured (with any seed that failed), failed, never run."""
    groups: dict[str, list[str]] = {"measured": [], "failed": [], "never run": []}
    for o in outcomes.values():
        done = sum(1 for r in o.repeats if r.complete)
        seeds = f"{done} of {len(o.repeats)} seeds complete" if o.repeats else "no seed measured"
        problems = [f"seed {r.seed} failed: {r.failed}" for r in o.repeats if r.failed]
        if o.state == "done":
            groups["measured"].append("; ".join([f"{o.variant}: {seeds}", *problems]))
        elif o.state in ("blocked", "failed"):
            why = (o.blocked or "").splitlines()[0] if o.blocked else o.state
            groups["failed"].append("; ".join([f"{o.variant} ({o.state}): {why}", seeds, *problems]))
        else:  # stopped while measuring, never run, or (a run that ended abnormally) left where it was
            label = "stopped while measuring" if o.state == "stopped" else "never run"
            groups["never run"].append("; ".join([f"{o.variant} ({label})", seeds, *problems]))
    return groups


@dataclass(frozen=True)
class Record:
    """Everything the record says."""

    catalog: Catalog
    outcomes: dict[str, Outcome]
    rows: list[Row]
    command: str
    placements: tuple[str, ...]
    wall_seconds: float
    stopped: str | None = None
    """Why the record is partial (the run was stopped); `None` when every variant ran."""


def _band(band: Band | None, unit: str) -> str:
    return "n/a" if band is None else band.text(unit)


def _cost(repeat: Repeat, which: str) -> str:
    cost = repeat.knee_cost if which == "knee" else repeat.rate_cost
    if cost is None:
        return "n/a"
    value = "no request met the SLO" if cost.gpu_seconds is None else f"{significant(cost.gpu_seconds)}"
    return (
        f"{value} at {significant(cost.rate)} req/s "
        f"({'held' if cost.held else 'SLO missed'}, {cost.good_share:.0%} good)"
    )


def _variant(name: str, flags: str) -> str:
    return f"**{name}** (`{flags}`)" if flags else f"**{name}** (the base command)"


def markdown(record: Record) -> str:
    c = record.catalog
    w = c.workload
    lines = [
        "# Engine configuration experiment record",
        "",
        f"Command: `{record.command}`",
        "",
        f"- Engine: `{c.engine.command}` serving `{c.engine.model}`, {c.engine.gpus} GPU(s) each"
        + (
            f", time scale {c.engine.time_scale:g} (every time and rate in the engine's seconds)"
            if c.engine.time_scale != 1
            else ""
        ),
        f"- Variants: {', '.join(_variant(v.name, v.flags) for v in c.variants)}; baseline **{c.baseline}**.",
        f"- Workload: {w.prompt_tokens.mean:g} prompt and {w.output_tokens.mean:g} output tokens on average "
        f"(longest request {longest(w)} tokens).",
        f"- SLO: TTFT <= {c.slo.ttft_seconds * 1000:g} ms and TPOT <= {c.slo.tpot_seconds * 1000:g} ms at "
        f"p{c.slo.percentile * 100:g}.",
        f"- Seeds: {', '.join(map(str, c.seeds))}; steps of "
        f"{c.measure.step:g} s after {c.measure.settle:g} s "
        f"settling, {c.measure.knee_steps} knee bisections; tolerance {c.measure.tolerance:.0%}.",
        f"- Placements: {', '.join(record.placements)}; wall time {record.wall_seconds / 60:.1f} min.",
    ]
    if record.stopped:
        lines += ["", f"**Partial record**: {record.stopped}."]
    lines += ["", "## What ran", ""]
    for group, entries in ran(record.outcomes).items():
        lines.append(f"- **{group}**: " + ("none" if not entries else "; ".join(entries)))
    lines += [
        "",
        "## Verdicts",
        "",
        RULES,
        "",
        rule(len(c.seeds)),
        "",
        "| question | variant | numbers | verdict | why |",
        "|---|---|---|---|---|",
    ]
    for row in record.rows:
        numbers = "<br>".join(count.text() for count in row.counts)
        why = row.why.splitlines()[0] if row.why else ""
        lines.append(f"| {row.question} | {row.variant} | {numbers} | **{row.verdict}** | {why} |")
    counts = {v: sum(1 for r in record.rows if r.verdict == v) for v in VERDICTS}
    lines += ["", "Rows: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + "."]
    lines += [
        "",
        "## Per seed",
        "",
        "| variant | seed | saturated | knee | cost at the knee (GPU-s per good request) | "
        "cost at the fixed rate | prompt boundary | rate boundary | seed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for outcome in record.outcomes.values():
        for r in outcome.repeats:
            saturated = "n/a" if r.saturated is None else f"{significant(r.saturated)} req/s"
            status = "complete" if r.complete else f"failed: {r.failed}" if r.failed else "not finished"
            lines.append(
                f"| {outcome.variant} | {r.seed} | {saturated} | "
                f"{_band(r.knee, 'req/s')} | {_cost(r, 'knee')} | "
                f"{_cost(r, 'rate')} | {_band(r.prompt_boundary, 'tokens')} | "
                f"{_band(r.rate_boundary, 'req/s')} | {status} |"
            )
    lines += ["", "## Engines", ""]
    for o in record.outcomes.values():
        started = "never healthy" if o.healthy_after is None else f"healthy after {o.healthy_after:.0f} s"
        held = "" if o.wall_seconds is None else f", held {o.wall_seconds:.0f} s"
        lines.append(
            f"- **{o.variant}** on {o.placement or 'no placement'}: {o.state}, {started}{held}; "
            f"log `{o.log}`; `{o.command}`"
        )
        lines += [f"  - {note}" for note in o.notes]
        if o.blocked:
            lines += ["", "  ```", *(f"  {line}" for line in o.blocked.splitlines()), "  ```"]
    return "\n".join(lines) + "\n"


def _repeat(repeat: Repeat) -> dict[str, Any]:
    data = dataclasses.asdict(repeat)
    data.pop("steps")
    data["steps"] = len(repeat.steps)
    return data


def document(record: Record) -> dict[str, Any]:
    c = record.catalog
    return {
        "schema_version": SCHEMA_VERSION,
        "command": record.command,
        "complete": record.stopped is None,
        "stopped": record.stopped,
        "catalog": record.catalog.source,
        "engine": dataclasses.asdict(c.engine),
        "baseline": c.baseline,
        "variants": [dataclasses.asdict(v) for v in c.variants],
        "workload": dataclasses.asdict(c.workload),
        "slo": dataclasses.asdict(c.slo),
        "seeds": list(c.seeds),
        "measure": dataclasses.asdict(c.measure),
        "rules": RULES,
        "rule": rule(len(c.seeds)),
        "false_finding_per_count": false_finding(len(c.seeds)),
        "ran": ran(record.outcomes),
        "placements": list(record.placements),
        "wall_seconds": record.wall_seconds,
        "rows": [dataclasses.asdict(row) for row in record.rows],
        "engines": [
            {
                **{k: v for k, v in dataclasses.asdict(o).items() if k != "repeats"},
                "log": str(o.log),
                "repeats": [_repeat(r) for r in o.repeats],
            }
            for o in record.outcomes.values()
        ],
    }


def write(out: Path, record: Record) -> list[Path]:
    """The Markdown, the JSON, each variant's steps and the picture; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / MARKDOWN_NAME, out / JSON_NAME]
    written[0].write_text(markdown(record), encoding="utf-8")
    written[1].write_text(json_out.text(document(record), sort_keys=True), encoding="utf-8")
    for outcome in record.outcomes.values():
        if any(r.steps for r in outcome.repeats):
            path = out / "steps" / f"{outcome.variant}.json"
            path.parent.mkdir(exist_ok=True)
            steps = [
                {"seed": r.seed, "what": what, "step": dataclasses.asdict(step)}
                for r in outcome.repeats
                for what, step in r.steps
            ]
            path.write_text(json_out.text(steps), encoding="utf-8")
            written.append(path)
    try:
        from lab.experiments.figure import plot  # matplotlib only when a record is written

        plot(out / PNG_NAME, record.catalog, record.outcomes, record.rows)
    except Exception as error:  # the picture is the record's least part: never the reason to lose it
        print(f"vllm-autoscale experiment: the picture was not drawn: {type(error).__name__}: {error}")
    else:
        written.append(out / PNG_NAME)
    return written
