"""The files a rehearsal leaves in `--out`, and the lines it prints.

The demo's report first (`lab.demo.report`: `demo.csv`, `demo.png`, `summary.json`, `summary.txt`, from
the live ticks and requests), then what only a live run has:

* `coldstarts.csv`: one row per replica: when the HPA asked, the process started, `/health` answered,
  the first token was served, the drain began and the process was gone (seconds into the run), and
  the GPU-seconds it held;
* `sent.csv`: what the clients sent, one row per request (`time,arrivals,prompt_tokens,output_tokens`),
  a trace `vllm-autoscale backtest --trace` reads;
* `rehearsal.json`, `rehearsal.txt`: the outcome beside its prediction, with the gap, and whether it
  falls inside the band of the seeded backtests of the traffic it was asked to play; for a run that
  ended early (`stopped`: the signal or the engine failure, when, and every request sent counted as
  completed, failed or in flight at the stop) the played span alone, without prediction or band;
* `band.png`: replicas and TTFT p90 over time, live against the band (`lab.rehearsal.band_view`).
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from lab import json_out
from lab.backtest.output.record import band_document
from lab.demo.decision.validation import Comparison
from lab.demo.report import write_report
from lab.demo.summary import Summary, duration, summarize
from lab.rehearsal import band_view
from lab.rehearsal.clients import Sent
from lab.rehearsal.prediction import BandPrediction, Prediction
from lab.rehearsal.replicas import ColdStart
from lab.rehearsal.runner import Played
from lab.rehearsal.settings import RehearsalSettings

COLD_STARTS_NAME: Final = "coldstarts.csv"
SENT_NAME: Final = "sent.csv"
JSON_NAME: Final = "rehearsal.json"
TEXT_NAME: Final = "rehearsal.txt"

_TIMES: Final = ("requested", "spawned", "healthy", "first_token", "retired", "stopped")


def describe(settings: RehearsalSettings) -> dict[str, Any]:
    """The run's settings, in the demo's `summary.json` keys where they mean the same."""
    p = settings.policy
    return {
        "engine": settings.engine,
        "model": settings.model,
        "metric": p.metric,
        "target_type": p.target_type,
        "target": p.target,
        "hpa_metrics": [dataclasses.asdict(m) for m in p.external_metrics()],
        "time_scale": settings.time_scale,
        "scrape_interval": settings.scrape_interval,
        "sync_period": p.sync_period,
        "tolerance": p.tolerance,
        "downscale_stabilization": p.downscale_stabilization,
        "min_replicas": p.min_replicas,
        "max_replicas": p.max_replicas,
        "start_replicas": settings.start_replicas,
        "grace": settings.grace,
        "gpus": list(settings.gpus),
        "seed": settings.seed,
    }


def write_cold_starts(path: Path, records: Sequence[ColdStart], end: float) -> None:
    """One row per replica; empty cells for what did not happen."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "replica",
                "initial",
                "gpu",
                "port",
                *(f"{name}_seconds" for name in _TIMES),
                "process_to_healthy_seconds",
                "request_to_ready_seconds",
                "process_to_first_token_seconds",
                "gpu_seconds_held",
            ]
        )
        for r in records:
            values = [getattr(r, name) for name in _TIMES]
            values += [r.to_healthy, r.to_ready, r.to_first_token, r.held(end)]
            writer.writerow(
                [r.name, str(r.initial).lower(), r.gpu or "", r.port or "", *(_cell(v) for v in values)]
            )


def write_sent(path: Path, sent: Sequence[Sent]) -> None:
    """The clients' requests as a backtest trace: one row per request."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["time", "arrivals", "prompt_tokens", "output_tokens"])
        writer.writerows([f"{s.at:.3f}", 1, s.prompt_tokens, s.output_tokens] for s in sent)


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def cold_start_lines(records: Sequence[ColdStart]) -> list[str]:
    """One line per replica: its cold start as measured."""
    lines = []
    for r in records:
        where = f"GPU {r.gpu}, " if r.gpu else ""
        steps = [f"asked at {r.requested:.0f} s"]
        if r.spawned is not None and r.spawned - r.requested > 0.5:
            steps.append(f"waited {r.spawned - r.requested:.1f} s for a GPU")
        steps.append(f"healthy {duration(r.to_healthy)} after its process started")
        if r.to_first_token is not None:
            steps.append(f"first token at {duration(r.to_first_token)}")
        label = "first replica" if r.initial else "scale-up"
        lines.append(f"  {r.name} ({label}, {where}port {r.port}): {', '.join(steps)}")
    return lines


def faults(played: Played) -> dict[str, Any]:
    """Replicas that failed after Ready, and what became of the requests in flight on them."""
    failed = [r for r in played.cold_starts if r.failed is not None]
    return {
        "replicas_failed": [{"replica": r.name, "at": r.failed, "reason": r.failure} for r in failed],
        **dataclasses.asdict(played.faults),
        "port_retries": sum(r.port_retries for r in played.cold_starts),
    }


def fault_lines(played: Played) -> list[str]:
    """What failed during the run, counted (nothing when nothing did)."""
    f = faults(played)
    if not f["replicas_failed"] and not f["port_retries"]:
        return []
    lines = [f"  {r['replica']} failed at {r['at']:.0f} s: {r['reason']}" for r in f["replicas_failed"]]
    return [
        f"faults          {len(f['replicas_failed'])} replicas failed after Ready; of their requests in "
        "flight "
        f"{f['retried']} retried on another replica (no token yet), {f['cut_off']} failed mid-stream, "
        f"{f['lost_retry']} found no replica to retry on; {f['port_retries']} engine starts retried on "
        "another port",
        *lines,
    ]


def stopped(played: Played, summary: Summary) -> dict[str, Any] | None:
    """How the run ended early, with every request sent accounted for; `None` for a whole run."""
    stop = played.stopped
    if stop is None:
        return None
    return {
        "at": stop.at,
        "by": stop.by,
        "reason": stop.reason,
        "load_began": stop.load_began,
        # sent = completed + failed + in_flight: the summary counts only the requests that finished.
        "sent": len(played.sent),
        "completed": summary.completed,
        "failed": summary.failed,
        "in_flight": stop.in_flight,
    }


def stopped_lines(played: Played, summary: Summary) -> list[str]:
    """The stop, said first: what follows covers the played span only (nothing for a whole run)."""
    s = stopped(played, summary)
    if s is None:
        return []
    why = f"{s['by']}: {s['reason']}" if s["reason"] else s["by"]
    when = f"{s['at']:.0f} s into the load" if s["load_began"] else "before the load began"
    return [
        f"STOPPED         {when} by {why}; of the {s['sent']} requests sent {s['completed']} completed, "
        f"{s['failed']} failed and {s['in_flight']} were in flight at the stop (not in the figures below); "
        "no prediction or band: this is the played span only",
    ]


def comparison_lines(summary: Summary, played: Played, prediction: Prediction, gap: Comparison) -> list[str]:
    """The rehearsal and its backtest side by side, with the gap."""
    card = prediction.scorecard
    return [
        f"{'':18}{'rehearsal':>12}{'backtest':>12}{'gap':>14}",
        f"{'SLO attainment':18}{summary.slo_attainment:>12.1%}{card.slo_attainment:>12.1%}"
        f"{gap.slo_points:>+11.1f} pt",
        f"{'replica-minutes':18}{summary.replica_minutes:>12.1f}{card.replica_minutes:>12.1f}"
        f"{gap.replica_minutes_ratio:>+13.1%}",
        f"{'peak replicas':18}{summary.peak_replicas:>12}{card.peak_replicas:>12}",
        f"{'scale events':18}{played.scale_events:>12}{card.scale_events:>12}",
        f"{'TTFT p90':18}{duration(summary.ttft_p90):>12}{duration(card.ttft_p90):>12}",
        f"{'requests':18}{summary.requests:>12}{card.requests:>12.0f}",
        f"backtest: {prediction.policy.describe()}, cold start {prediction.policy.cold_start:.1f} s "
        f"(measured), on the profile's replica: {prediction.calibration.capacity.text('req/s')}",
    ]


def inside(summary: Summary, band: BandPrediction) -> dict[str, bool]:
    """Whether each live outcome falls within the range of the band's seeds."""
    result = {
        "slo_attainment": band.band.slo.holds(summary.slo_attainment),
        "replica_minutes": band.band.replica_minutes.holds(summary.replica_minutes),
    }
    if band.band.ttft_p90 is not None and summary.ttft_p90 is not None:
        result["ttft_p90"] = band.band.ttft_p90.holds(summary.ttft_p90)
    return result


def band_lines(summary: Summary, band: BandPrediction) -> list[str]:
    """The live outcome against the band: median, range and whether it is inside."""
    b, held = band.band, inside(summary, band)

    def word(key: str) -> str:
        return "inside" if held.get(key) else "OUTSIDE"

    lines = [
        f"band: {b.seeds} seeded backtests of the traffic asked for (range: one more day falls outside "
        f"with probability {2 / (b.seeds + 1):.1%})",
        f"{'':18}{'rehearsal':>12}{'median':>12}{'range':>20}",
        f"{'SLO attainment':18}{summary.slo_attainment:>12.1%}{b.slo.median:>12.1%}"
        f"{f'{b.slo.low:.1%}-{b.slo.high:.1%}':>20}  {word('slo_attainment')}",
        f"{'replica-minutes':18}{summary.replica_minutes:>12.1f}{b.replica_minutes.median:>12.1f}"
        f"{f'{b.replica_minutes.low:.1f}-{b.replica_minutes.high:.1f}':>20}  {word('replica_minutes')}",
    ]
    if b.ttft_p90 is not None and "ttft_p90" in held:
        span = f"{duration(b.ttft_p90.low)}-{duration(b.ttft_p90.high)}"
        lines.append(
            f"{'TTFT p90':18}{duration(summary.ttft_p90):>12}{duration(b.ttft_p90.median):>12}{span:>20}"
            f"  {word('ttft_p90')}"
        )
    return lines


def write(
    settings: RehearsalSettings,
    played: Played,
    prediction: Prediction | None,
    gap: Comparison | None,
    *,
    title: str,
    band: BandPrediction | None = None,
) -> tuple[Summary, str]:
    """Every file into `settings.out`; the summary and the text printed at the end."""
    out = settings.out
    if played.ticks:
        summary = write_report(
            out,
            played.ticks,
            played.requests,
            slo=settings.slo,
            title=title,
            target=settings.policy.target if settings.policy.target_type == "AverageValue" else None,
            settings=describe(settings),
        )
    else:  # stopped before the load began: no tick to draw or tabulate, only the engines' starts
        out.mkdir(parents=True, exist_ok=True)
        summary = summarize(played.ticks, played.requests, settings.slo)
    write_cold_starts(out / COLD_STARTS_NAME, played.cold_starts, played.end)
    write_sent(out / SENT_NAME, played.sent)
    gpu_minutes = played.gpu_seconds / 60
    lines = [
        *stopped_lines(played, summary),
        summary.text(),
        f"GPU-minutes     {gpu_minutes:.1f} held by {len(played.cold_starts)} engine processes "
        f"(from each one's start to its stop, draining included)",
        "cold starts",
        *cold_start_lines(played.cold_starts),
        *fault_lines(played),
    ]
    if prediction is not None and gap is not None:
        lines += ["", *comparison_lines(summary, played, prediction, gap)]
    if band is not None:
        lines += ["", *band_lines(summary, band)]
        view = band_view.series(band, played.ticks, played.requests)
        band_view.plot(
            out / band_view.PNG_NAME,
            view,
            title=f"{title}: live against its band",
            slo_ttft=settings.slo.ttft,
        )
    text = "\n".join(lines)
    document = {
        "settings": describe(settings),
        "summary": dataclasses.asdict(summary),
        "gpu_minutes": gpu_minutes,
        "scale_events": played.scale_events,
        "cold_starts": [dataclasses.asdict(r) for r in played.cold_starts],
        "faults": faults(played),
        "stopped": stopped(played, summary),
        "prediction": None
        if prediction is None
        else {
            "policy": prediction.policy.describe(),
            "cold_start": prediction.policy.cold_start,
            "calibration": prediction.calibration.lines(),
            "scorecard": dataclasses.asdict(prediction.scorecard),
        },
        "gap": None
        if gap is None
        else {"slo_points": gap.slo_points, "replica_minutes_ratio": gap.replica_minutes_ratio},
        "band": None
        if band is None
        else {
            **(band_document(band.band) or {}),
            "inside": inside(summary, band),
            "traffic": band.history.source,
            "router": "least-inflight",
        },
    }
    (out / JSON_NAME).write_text(json_out.text(document, sort_keys=True), encoding="utf-8")
    (out / TEXT_NAME).write_text(text + "\n", encoding="utf-8")
    return summary, text
