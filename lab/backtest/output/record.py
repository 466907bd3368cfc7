"""The decision record: Markdown for people, JSON for tools, both from one `Record`.

Every candidate appears with its verdict, the reason in one line, and the evidence behind it (its
outcomes over the seeds at the capacity estimate, as a median and a range, and at both ends of the
capacity's band); the recommended policy comes with the manifests that implement it and the adapter
configuration its metric needs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

from lab import json_out
from lab.backtest.band import Band
from lab.backtest.calibration import Calibration
from lab.backtest.decision import Decision, Judged, frontier
from lab.backtest.history import History
from lab.backtest.outcome import Scorecard
from lab.backtest.output.manifests import ScaleTarget, adapter_config, deployable, dump, hpa, scaled_object
from lab.slo import Slo

SCHEMA_VERSION: Final = 1


@dataclass(frozen=True)
class Record:
    """Everything the record says."""

    history: History
    calibration: Calibration
    slo: Slo
    decision: Decision
    target: ScaleTarget
    command: str


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.0f} ms"


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _range(band: Band | None, scale: float, digits: int) -> str:
    if band is None:
        return "n/a"
    return f"{band.slo.low * scale:.{digits}f}-{band.slo.high * scale:.{digits}f} %"


def _minutes(band: Band | None) -> str:
    return "n/a" if band is None else f"{band.replica_minutes.low:.1f}-{band.replica_minutes.high:.1f}"


def _row(judged: Judged, decision: Decision) -> str:
    o, band = judged.point, judged.band
    return (
        f"| {o.name} | {judged.verdict} | {o.slo_attainment * 100:.1f} % | {_range(band, 100, 1)} | "
        f"{o.ttft_attainment * 100:.1f} % | "
        f"{o.tpot_attainment * 100:.1f} % | {_ms(o.ttft_p90)} | "
        f"{_ms(o.ttft_p99)} | {o.replica_minutes:.1f} | "
        f"{_minutes(band)} | {o.gpu_hours:.3g} | "
        f"{_ratio(decision.cost_ratio(judged))} | "
        f"{o.scale_events} | {o.oscillations} | {o.peak_replicas} | {o.dropped:.0f} | {o.in_flight_end:.0f} |"
    )


TABLE_HEADER: Final = (
    "| policy | verdict | SLO | SLO range | TTFT ok | TPOT ok | TTFT p90 | TTFT p99 | replica-min | "
    "replica-min range | GPU-h | x foresight | scale events | oscillations | peak replicas | dropped | "
    "in flight at end |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def band_line(decision: Decision) -> str:
    """What the table's numbers are: medians over the seeds and their ranges, or one fluid replay."""
    seeds = next((j.band.seeds for j in decision.judged if j.band is not None), 0)
    if not seeds:
        return "One fluid replay per policy (requests as amounts, the fleet's means read as the metric)."
    return (
        f"Each policy replayed on {seeds} seeds of arrival instants and scrape phase (whole requests; the "
        f"HPA reads counts at its scrapes, as the adapter serves them): each number is the median over "
        f"the seeds, the ranges span the worst and the best seed. One more day of this traffic falls "
        f"outside a range of {seeds} seeds with probability 2/{seeds + 1} ({(2 / (seeds + 1)) * 100:.0f} %)."
    )


def table(decision: Decision) -> str:
    """The per-policy table in Markdown."""
    return "\n".join([TABLE_HEADER, *(_row(j, decision) for j in decision.judged)])


def foresight_lines(decision: Decision) -> list[str]:
    """What the record says about the bound, the frontier and, where it applies, standing headroom."""
    bound = decision.foresight
    target = decision.rules.slo_attainment
    if bound is None:
        return ["No foresight bound was run: cost ratios are not known."]
    short = (
        "."
        if bound.point.slo_attainment >= target
        else f", **below the {_pct(target)} target**: even knowing the traffic, the fleet's min/max or "
        "the replica's own latency cannot hold the SLO."
    )
    lines = [
        "**Foresight** (the denominator of every cost ratio, "
        f"`x foresight` above): {bound.policy.describe()}; "
        f"{bound.point.gpu_hours:.3g} GPU-h at {_pct(bound.point.slo_attainment)} SLO attainment{short}",
        "",
        "Pareto frontier of the deployable policies (no other is cheaper and at least as good): "
        + ", ".join(
            f"{j.policy.name} ({j.point.gpu_hours:.3g} GPU-h, {_pct(j.point.slo_attainment)}, "
            f"{_ratio(decision.cost_ratio(j))}x)"
            for j in frontier(tuple(j for j in decision.judged if j.policy.candidate))
        )
        + ".",
    ]
    cheapest = decision.cheapest_meeting()
    if decision.headroom_only():
        bound = next(j for j in decision.judged if j.policy.kind == "reactive")
        lines += [
            "",
            f"**{_pct(target)} is out of reach without standing headroom** on this trace: the reactive "
            f"bound (the present rate known at once, no lag) reaches {_pct(bound.point.slo_attainment)} "
            "and no anticipating policy reaches the target: the traffic rises faster than one sync "
            "period plus one cold start, and nothing the HPA reads announces it.",
        ]
    if cheapest is not None:
        lines += [
            "",
            f"Cheapest deployable policy at {_pct(target)} or better: **{cheapest.policy.name}** "
            f"({cheapest.policy.describe()}), {cheapest.point.gpu_hours:.3g} GPU-h, "
            f"{_ratio(decision.cost_ratio(cheapest))}x foresight ({cheapest.verdict}).",
        ]
    else:
        lines += ["", f"No deployable policy reaches {_pct(target)} at the capacity estimate."]
    return lines


def _pct(value: float) -> str:
    return f"{value * 100:.1f} %"


def manifests(judged: Judged, target: ScaleTarget) -> dict[str, str]:
    """The YAML documents of a judged policy: `hpa`, `scaledobject`, `adapter-config` where they apply."""
    policy = judged.policy
    if not deployable(policy):
        return {}
    out = {"hpa": dump(hpa(policy, target)), "scaledobject": dump(scaled_object(policy, target))}
    config = adapter_config(policy)
    if config:
        out["adapter-config"] = dump(config)
    return out


def markdown(record: Record) -> str:
    """The record as Markdown."""
    history, decision = record.history, record.decision
    gaps = history.gaps()
    lines = [
        "# Scaling policy decision record",
        "",
        f"Command: `{record.command}`",
        "",
        f"- Traffic: {history.source}; {history.requests:.0f} requests over {history.duration / 60:.1f} min "
        f"(step {history.step:g} s).",
        f"- Gaps: {'none' if not gaps else ', '.join(f'{g.start:g}-{g.end:g} s' for g in gaps)} "
        "(simulated as separate segments, never as zero traffic).",
        *(f"- Note: {note}" for note in history.notes),
        f"- SLO: TTFT <= {_ms(record.slo.ttft)} and TPOT <= {_ms(record.slo.tpot)} for "
        f"{decision.rules.slo_attainment * 100:g} % of requests.",
        "",
        "## Calibration",
        "",
        "```",
        *record.calibration.lines(),
        "```",
        "",
        "## Outcomes at the capacity estimate",
        "",
        band_line(decision),
        "",
        table(decision),
        "",
        *foresight_lines(decision),
        "",
        "## Verdicts",
        "",
        f"Rules: supported when the SLO holds even at the pessimistic capacity and on the worst seed; "
        f"rejected when it fails even at the optimistic one and on the best seed, or costs more than "
        f"{decision.rules.max_cost_ratio:g}x the cheapest supported; "
        f"open when fewer than {decision.rules.min_requests} requests, gaps over "
        f"{decision.rules.max_gap_share * 100:g} % of the range, or the capacity's uncertainty or the "
        "seeds decide.",
        "",
        *(
            f"- **{j.policy.name}** ({j.policy.describe()}): **{j.verdict}**: {j.reason}"
            for j in decision.judged
        ),
        "",
        "## Recommendation",
        "",
    ]
    best = decision.recommended
    if best is None:
        lines.append(
            "No candidate is supported by this window: widen it, "
            "fix the capacity's uncertainty, or add candidates."
        )
        return "\n".join(lines) + "\n"
    lines.append(f"**{best.policy.name}**: {best.policy.describe()}. {best.reason}.")
    documents = manifests(best, record.target)
    if not documents:
        lines.append(f"\n{best.policy.describe()}: no autoscaler object implements it.")
    titles = {
        "hpa": "HorizontalPodAutoscaler",
        "scaledobject": "KEDA ScaledObject (README 'With KEDA')",
        "adapter-config": "Adapter configuration",
    }
    for key, text in documents.items():
        lines += ["", f"### {titles[key]}", "", "```yaml", text.rstrip(), "```"]
    return "\n".join(lines) + "\n"


def _outcome(o: Scorecard) -> dict[str, Any]:
    return dataclasses.asdict(o)


def band_document(band: Band | None) -> dict[str, Any] | None:
    """A band as JSON: the seeds, the range's coverage, each quantity's median and range."""
    if band is None:
        return None
    return {
        "seeds": band.seeds,
        "coverage": band.coverage,
        "slo_attainment": dataclasses.asdict(band.slo),
        "replica_minutes": dataclasses.asdict(band.replica_minutes),
        "ttft_p90": None if band.ttft_p90 is None else dataclasses.asdict(band.ttft_p90),
    }


def document(record: Record) -> dict[str, Any]:
    """The record as JSON-ready data."""
    history, decision = record.history, record.decision
    cal = record.calibration
    best = decision.recommended
    return {
        "schema_version": SCHEMA_VERSION,
        "command": record.command,
        "traffic": {
            "source": history.source,
            "start": history.start,
            "step_seconds": history.step,
            "duration_seconds": history.duration,
            "requests": history.requests,
            "gaps": [{"start": g.start, "end": g.end} for g in history.gaps()],
            "notes": list(history.notes),
        },
        "calibration": {
            "capacity": dataclasses.asdict(cal.capacity),
            "model": dataclasses.asdict(cal.model),
            "methods": cal.methods,
        },
        "slo": {**dataclasses.asdict(record.slo), "attainment": decision.rules.slo_attainment},
        "rules": dataclasses.asdict(decision.rules),
        "foresight": None
        if decision.foresight is None
        else {
            "description": decision.foresight.policy.describe(),
            "knee_rate": decision.foresight.policy.knee_rate,
            "gpu_hours": decision.foresight.point.gpu_hours,
            "slo_attainment": decision.foresight.point.slo_attainment,
        },
        "frontier": [
            j.policy.name for j in frontier(tuple(j for j in decision.judged if j.policy.candidate))
        ],
        "headroom_only": decision.headroom_only(),
        "cheapest_meeting_slo": None
        if (cheapest := decision.cheapest_meeting()) is None
        else {"name": cheapest.policy.name, "cost_ratio": decision.cost_ratio(cheapest)},
        "candidates": [
            {
                "name": j.policy.name,
                "description": j.policy.describe(),
                "kind": j.point.kind,
                "verdict": j.verdict,
                "reason": j.reason,
                "cost_ratio": decision.cost_ratio(j),
                "band": band_document(j.band),
                "evidence": {
                    "estimate": _outcome(j.point),
                    "pessimistic": _outcome(j.pessimistic),
                    "optimistic": _outcome(j.optimistic),
                },
            }
            for j in decision.judged
        ],
        "recommended": None
        if best is None
        else {"name": best.policy.name, "reason": best.reason, "manifests": manifests(best, record.target)},
    }


def json_text(record: Record) -> str:
    """The JSON record, deterministic (sorted keys)."""
    return json_out.text(document(record), sort_keys=True)
