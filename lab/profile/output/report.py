"""What a profile leaves in `--out`: the profile file, its PNG, a summary and the saturation config.

`profile.json` is always written, a partial one too (`complete` false, its `error` set, no knee
unless the steps bracketed one); the PNG whenever there are steps to draw; `saturation.yaml`
only with a knee, since its parameters are the knee's.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path
from typing import Final

from lab.load.server import Server
from lab.profile.checks import checks
from lab.profile.knee import find_knee, rate_verdicts, tpot_vs_batch
from lab.profile.prefill.plan import PrefillFit
from lab.profile.recommend import HEADROOM, config_snippet, fitted, recommend
from lab.profile.schema import Knee, MetricTarget, Profile, Step, dump
from lab.profile.settings import Run, Settings
from lab.profile.steps import STABLE_SHARE, percentile_key
from lab.profile.twin.model import ModelKnee
from lab.units import format_duration

PROFILE_NAME: Final = "profile.json"
PNG_NAME: Final = "profile.png"
SUMMARY_NAME: Final = "summary.txt"
SATURATION_NAME: Final = "saturation.yaml"
# The client's TTFT above the server's by more than this share, and by more than a plain HTTP round
# trip in real time, is worth a word (a proxy, a far client, a tunnel).
_CROSS_CHECK: Final = 0.25
_SLOW_PATH_SECONDS: Final = 0.02


def build(settings: Settings, run: Run) -> Profile:
    """The profile of a run: knee, curves and recommendations from its steps."""
    steps = tuple(run.steps or ())
    server = run.server or Server("unknown", settings.model, settings.max_num_seqs, None, None)
    knee = find_knee(steps, settings.slo.percentile)
    if run.model_knee is not None and run.model_knee.check != "refuted":
        knee = _modelled(steps, run.model_knee, settings.slo.percentile)
    targets: dict[str, MetricTarget] = {}
    parameters: dict[str, float] = {}
    refused: dict[str, str] = {}
    if knee is not None:
        targets, parameters, refused = recommend(steps, knee)
        # The state at the knee from the fitted curves, as the saturation divisors read it.
        knee = replace(
            knee,
            concurrency=round(fitted(steps, knee.rate, lambda s: s.concurrency).at(knee.rate), 3),
            kv_usage=round(fitted(steps, knee.rate, lambda s: s.kv_usage).at(knee.rate), 4),
        )
    error = run.error
    if error is None and knee is None:
        error = "the steps did not bracket a knee"
        if run.model_knee is not None and run.model_knee.check == "refuted":
            error = (
                f"the model was refuted and no open-loop step below {run.model_knee.at or 0:.3g} req/s held"
            )
    return Profile(
        server=server,
        workload=settings.workload,
        slo=settings.slo,
        steps=steps,
        knee=knee,
        tpot_vs_batch=tpot_vs_batch(steps),
        prefill_seconds_per_token=run.prefill_seconds_per_token,
        targets=targets,
        complete=knee is not None and run.error is None,
        error=error,
        cold_start_seconds=run.cold_start_seconds,
        notes=tuple(_notes(settings, run)),
        saturated_rate=run.saturated_rate,
        saturation=parameters,
        no_target=refused,
        checks=tuple(
            checks(steps, knee, settings.slo, run.saturated_rate, settings.workload.output_tokens.mean)
        ),
        saturated_interval=run.saturated_interval,
        prefill_interval=run.prefill_interval,
        prefill_probe=tuple(run.prefill_probe),
    )


def _modelled(steps: tuple[Step, ...], model: ModelKnee, percentile: float) -> Knee:
    """The knee of a model confirmed by one open-loop step (`lab.profile.twin.model`): its band's lower
    end, the band's upper end where `failed_rate` stands, the latencies the step measured."""
    at = next(s for s in reversed(steps) if s.kind == "rate" and s.offered_rate == model.at)
    key = percentile_key(percentile)
    return Knee(
        rate=model.low,
        concurrency=at.concurrency,
        kv_usage=at.kv_usage,
        ttft_seconds=at.ttft_seconds[key],
        tpot_seconds=at.tpot_seconds[key],
        failed_rate=model.high,
        model=model.describe(),
    )


def _notes(settings: Settings, run: Run) -> list[str]:
    notes = []
    if run.model_knee is not None and run.model_knee.check == "refuted":
        notes.append(run.model_knee.refutation())
    if settings.time_scale != 1:
        notes.append(
            f"the server ran at time scale {settings.time_scale:g}: every time and rate is in its own seconds"
        )
    pairs = [
        (s.ttft_seconds["mean"], s.server_ttft_mean_seconds)
        for s in run.steps or ()
        if s.server_ttft_mean_seconds and "mean" in s.ttft_seconds and s.waiting < 1
    ]
    if pairs:
        client = statistics.median(c for c, _s in pairs)
        server = statistics.median(s for _c, s in pairs)
        notes.append(
            f"cross-check: below saturation the client's mean TTFT is {client * 1000:.1f}ms, the server's "
            f"{server * 1000:.1f}ms (its histogram); the "
            f"{(client - server) * 1000:.1f}ms between is the network and HTTP"
        )
        real_gap = (client - server) / settings.time_scale
        if client < server * (1 - _CROSS_CHECK):
            notes.append(
                "the server's TTFT exceeds the client's: its histogram also counts other clients' requests"
            )
        elif client > server * (1 + _CROSS_CHECK) and real_gap > _SLOW_PATH_SECONDS:
            notes.append(
                f"the client waits {real_gap * 1000:.0f}ms (real) "
                "longer than the server counts: something between "
                "them (a proxy, kubectl port-forward, the network) adds latency to every TTFT"
            )
    return notes


def summary(profile: Profile) -> str:
    """The profile in words: the knee, the targets with their reasons, and the saturation config."""
    s = profile.server
    lines = [
        f"vLLM {s.vllm_version} serving {s.model!r}; workload "
        f"{profile.workload.prompt_tokens.mean:g} prompt and "
        f"{profile.workload.output_tokens.mean:g} output tokens; "
        f"SLO TTFT {profile.slo.ttft_seconds * 1000:g}ms, "
        f"TPOT {profile.slo.tpot_seconds * 1000:g}ms at p{profile.slo.percentile * 100:g}",
    ]
    if profile.cold_start_seconds is not None:
        lines.append(f"cold start (launch to ready): {format_duration(profile.cold_start_seconds)}")
    if profile.saturated_rate:
        spread = profile.saturated_interval
        across = f" (steps on the plateau: {spread[0]:.3g}-{spread[1]:.3g})" if spread else ""
        lines.append(
            f"saturated throughput (closed loop, standing queue): {profile.saturated_rate:.3g} req/s{across}"
        )
    if profile.prefill_interval is not None:
        low, high = profile.prefill_interval
        # the t interval is symmetric about the least-squares slope
        lines.append(PrefillFit((low + high) / 2, low, high).describe(len(profile.prefill_probe)))
    elif profile.prefill_seconds_per_token is not None:
        lines.append(f"prefill: {profile.prefill_seconds_per_token * 1e6:.1f} µs of TTFT per prompt token")
    knee = profile.knee
    if knee is None:
        lines.append(f"no knee: {profile.error}")
    else:
        lines.append(
            f"knee: {knee.rate:.3g} req/s per replica "
            f"({'the lower end of' if knee.model else 'the highest rate that held'}"
            f"{_band(profile, knee)}), {knee.concurrency:.1f} "
            f"in flight, KV {knee.kv_usage:.0%}, TTFT "
            f"{knee.ttft_seconds * 1000:.0f}ms, TPOT {knee.tpot_seconds * 1000:.1f}ms"
        )
        lines.append(f"recommended targets (each metric's value at {HEADROOM:.0%} of the knee rate):")
        for name, target in profile.targets.items():
            lines.append(f"  {name}: {target.type} {target.value:g}")
            lines.append(f"    {target.reasoning}")
        for name, reason in profile.no_target.items():
            lines.append(f"  {name}: no target")
            lines.append(f"    {reason}")
        lines.append("vllm_saturation parameters for the adapter's configuration:")
        lines += ["  " + line for line in config_snippet(profile.saturation).splitlines()]
        if not profile.complete:
            lines.append(f"partial: {profile.error}")
    lines += [f"check: {check}" for check in profile.checks]
    lines += [f"note: {note}" for note in profile.notes]
    return "\n".join(lines)


def _band(profile: Profile, knee: Knee) -> str:
    """How far the knee's band reaches above the knee, and what closes it: the lowest rate that
    failed, one where the server flips a coin (its step ended marginal), or the stable share of the
    saturated throughput, above which no rate holds by definition (the search bisects below it)."""
    if knee.model is not None and knee.failed_rate is not None:
        reach = (knee.failed_rate - knee.rate) / knee.rate
        return (
            f" the band of {knee.model}; the band reaches "
            f"{reach:.0%} above the knee, to {knee.failed_rate:.3g} "
            f"req/s: ±{reach / 2:.1%}"
        )
    if knee.failed_rate is None:
        return ""
    top, why = knee.failed_rate, "the lowest rate that failed"
    decided = next((s for s in rate_verdicts(profile.steps) if s.offered_rate == knee.failed_rate), None)
    if decided is not None and decided.marginal:
        why += " (marginal there: the server itself flips between held and failed at that rate)"
    if profile.saturated_rate and STABLE_SHARE * profile.saturated_rate < top:
        top = STABLE_SHARE * profile.saturated_rate
        why = (
            f"{STABLE_SHARE:.0%} of the saturated throughput, above which no rate holds (the lowest rate "
            f"that failed: {knee.failed_rate:.3g})"
        )
    reach = (top - knee.rate) / knee.rate
    return f"; the band reaches {reach:.0%} above it, to {top:.3g} req/s, {why}: ±{reach / 2:.1%}"


def write(out: Path, profile: Profile, *, title: str) -> list[Path]:
    """Write the files into `out`; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / PROFILE_NAME]
    dump(profile, written[0])
    (out / SUMMARY_NAME).write_text(summary(profile) + "\n", encoding="utf-8")
    written.append(out / SUMMARY_NAME)
    if profile.steps:
        from lab.profile.output.figure import plot  # matplotlib only when there is something to draw

        plot(out / PNG_NAME, profile, title=title)
        written.append(out / PNG_NAME)
    if profile.knee is not None:
        (out / SATURATION_NAME).write_text(config_snippet(profile.saturation), encoding="utf-8")
        written.append(out / SATURATION_NAME)
    return written
