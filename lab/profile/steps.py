"""One step of a profile, summarized: what the client saw, what the server said, and the verdicts.

A step runs from `start`; requests sent before `settled` warm it up and are not measured. Latencies
are those of requests sent in [settled, `latency_end`] (a little before the end, so nearly all have
finished); one still running counts with the time it has waited so far, a lower bound of its TTFT.
Throughput counts completions in [settled, end]; gauges are averaged over the snapshots there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from lab.load.client import RequestResult
from lab.load.metrics_reader import Snapshot
from lab.profile import verdict
from lab.profile.schema import PercentileSlo, Step
from lab.profile.verdict import Evidence
from lab.stats import linear_fit, percentile

# Near saturation a finite window cannot tell a slow climb to a high level from growth without end,
# and at the saturated throughput itself the queue has no steady state at all (it wanders without
# bound): a step offering more than this share of the saturated throughput never counts as stable.
# The margin also covers the few percent by which that throughput is measured.
STABLE_SHARE: Final = 0.95


@dataclass(frozen=True)
class Window:
    """Where one step lies on the profile's clock, and what it offered."""

    kind: Literal["rate", "concurrency"]
    offered: float
    """Requests per second (rate step) or clients (concurrency step)."""
    start: float
    settled: float
    latency_end: float
    end: float

    @classmethod
    def measured(
        cls,
        kind: Literal["rate", "concurrency"],
        offered: float,
        start: float,
        settled: float,
        end: float,
        e2e: float,
    ) -> Window:
        """The window of a step that measured from `settled` to `end`: latencies count for requests
        sent up to half a lifetime (`e2e`) before the end, at most a quarter of the span, so that
        nearly all of them have finished when the step is summarized."""
        return cls(kind, offered, start, settled, end - min(0.5 * e2e, 0.25 * (end - settled)), end)


def over_stable_share(rate: float, saturated_rate: float | None) -> bool:
    """Whether an offered `rate` lies above `STABLE_SHARE` of the saturated throughput (when measured):
    such a step fails by definition, not by measurement."""
    return saturated_rate is not None and rate > STABLE_SHARE * saturated_rate * (1 + 1e-9)


def percentile_key(q: float) -> str:
    """`p90` for 0.9, `p99.9` for 0.999."""
    return f"p{q * 100:.10g}"


def _summary(values: Sequence[float], slo_q: float) -> dict[str, float]:
    if not values:
        return {}
    finite = [v for v in values if math.isfinite(v)]
    summary = {percentile_key(q): percentile(values, q) for q in sorted({0.5, 0.9, 0.99, slo_q})}
    if finite:
        summary["mean"] = sum(finite) / len(finite)
    return summary


def _slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x; `None` with fewer than three points or no spread in x."""
    fit = linear_fit(points) if len(points) >= 3 else None
    return None if fit is None else fit[1]


def summarize(
    window: Window,
    outcomes: Sequence[RequestResult],
    pending: Sequence[tuple[float, float | None]],
    snapshots: Sequence[Snapshot],
    slo: PercentileSlo,
    *,
    saturated_rate: float | None = None,
    final: bool = True,
) -> Step:
    """The step of `window` from every outcome so far, the (send time, TTFT if known) of requests
    still running at `window.end`, and the metrics snapshots; `saturated_rate` (if measured) bounds
    a stable rate. `final`: the window cannot grow any longer, so an undecided verdict follows the
    point estimates (and the step is marked `marginal`)."""
    measured = [o for o in outcomes if window.settled <= o.sent <= window.latency_end]
    running = [(sent, ttft) for sent, ttft in pending if window.settled <= sent <= window.latency_end]
    ok = [o for o in measured if o.error is None]
    errors = len(measured) - len(ok)
    ttfts = [o.ttft for o in ok if o.ttft is not None]
    ttfts += [window.end - sent if ttft is None else ttft for sent, ttft in running]
    ttfts += [math.inf] * errors
    tpots = [o.tpot for o in ok if o.tpot is not None] + [math.inf] * errors
    e2es = [o.e2e for o in ok if o.e2e is not None] + [math.inf] * errors
    span = window.end - window.settled
    completed = sum(
        1
        for o in outcomes
        if o.error is None and o.done is not None and window.settled <= o.done <= window.end
    )
    achieved = completed / span if span > 0 else 0.0
    inside = [s for s in snapshots if window.settled <= s.at <= window.end]
    middle = (window.settled + window.end) / 2
    # Requests sent in the window, finished or not: what the server was offered there.
    sent = sum(1 for o in outcomes if window.settled <= o.sent <= window.end)
    sent += sum(1 for t, _ttft in pending if window.settled <= t <= window.end)
    over = window.kind == "rate" and over_stable_share(window.offered, saturated_rate)
    sent_ok = [o.sent for o in ok] + [sent for sent, _ttft in running]
    ttft_samples = list(
        zip(
            sent_ok,
            [o.ttft if o.ttft is not None else math.inf for o in ok]
            + [window.end - sent if t is None else t for sent, t in running],
            strict=True,
        )
    )
    tpot_samples = [(o.sent, o.tpot) for o in ok if o.tpot is not None]
    evidence = Evidence(
        ttft_miss=verdict.miss_share(ttft_samples, slo.ttft_seconds, window.settled, window.latency_end),
        tpot_miss=verdict.miss_share(tpot_samples, slo.tpot_seconds, window.settled, window.latency_end),
        # The later half: after a rise in load the queue climbs to its new level and stays there,
        # while an unbounded queue keeps climbing.
        waiting_slope=verdict.trend(
            [(s.at, s.waiting) for s in inside if s.at >= middle], middle, window.end
        ),
        completion_ratio=completed / sent if window.kind == "rate" and sent else None,
        offered_rate=window.offered if window.kind == "rate" else achieved,
        allowed_miss=1 - slo.percentile,
        errors=errors,
        over_saturation=over,
        trend_seconds=max(window.end - middle, 1e-9),
    )
    judged = verdict.judge(evidence)
    marginal = judged == "undecided" and final
    if marginal:
        judged = verdict.point_verdict(evidence)
    stable = (
        verdict.judge(replace(evidence, ttft_miss=None, tpot_miss=None, errors=0)) != "failed" and not over
    )
    ttft, tpot = _summary(ttfts, slo.percentile), _summary(tpots, slo.percentile)
    key = percentile_key(slo.percentile)
    slo_met = bool(ttft) and bool(tpot) and ttft[key] <= slo.ttft_seconds and tpot[key] <= slo.tpot_seconds
    server = _server(inside, slo.percentile)
    return Step(
        offered_rate=window.offered if window.kind == "rate" else achieved,
        achieved_rate=achieved,
        concurrency=_mean([s.running + s.waiting for s in inside]),
        running=_mean([s.running for s in inside]),
        waiting=_mean([s.waiting for s in inside]),
        kv_usage=_mean([s.kv_usage for s in inside]),
        preemptions=max(0.0, inside[-1].preemptions - inside[0].preemptions) if inside else 0.0,
        ttft_seconds=ttft,
        tpot_seconds=tpot,
        e2e_seconds=_summary(e2es, slo.percentile),
        server_ttft_seconds=server[0],
        server_tpot_seconds=server[1],
        server_ttft_mean_seconds=server[2],
        requests=len(measured) + len(running),
        queue_stable=stable,
        slo_met=slo_met,
        kind=window.kind,
        errors=errors,
        clients=round(window.offered) if window.kind == "concurrency" else None,
        generation_tokens_per_second=_token_rate(inside),
        window_seconds=span,
        ttft_miss=evidence.ttft_miss,
        tpot_miss=evidence.tpot_miss,
        ttft_interval=verdict.percentile_interval(
            ttft_samples, slo.percentile, window.settled, window.latency_end
        ),
        waiting_slope=evidence.waiting_slope,
        completion_ratio=evidence.completion_ratio,
        verdict=judged,
        marginal=marginal,
    )


def standing_queue(step: Step) -> bool:
    """Whether a queue of at least half the batch stood at the server through the step, so that a
    slot that frees is refilled at once: the server ran at its saturated throughput."""
    return step.waiting >= max(1.0, 0.5 * step.running)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _token_rate(snapshots: Sequence[Snapshot]) -> float | None:
    """Generated tokens per second: a fit over every snapshot, so the timing of one read does not decide."""
    return _slope([(s.at, s.generation_tokens) for s in snapshots])


def _server(snapshots: Sequence[Snapshot], q: float) -> tuple[float | None, float | None, float | None]:
    """The server's TTFT quantile, mean TPOT and mean TTFT over the snapshots (from histogram deltas)."""
    if len(snapshots) < 2:
        return None, None, None
    ttft = snapshots[-1].ttft.minus(snapshots[0].ttft)
    tpot = snapshots[-1].tpot.minus(snapshots[0].tpot)
    return ttft.quantile(q), tpot.mean, ttft.mean
