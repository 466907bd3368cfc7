"""The profile's checks of itself, printed with its summary: each compares two measurements that
should agree, and says whether they did.

* **The repeat at the knee**: the knee's rate measured at least twice, the repeat from an idle
  server; where the two disagreed, a third, longer step decided (`knee.rate_verdicts`).
* **Client against server TTFT** at the knee: the client's mean against the server's own histogram
  (Δsum/Δcount, exact); a gap beyond network and HTTP means something sits between them.
* **Open-loop against closed-loop saturation**: what the server completed in the short step past
  saturation (a backlog, open-loop arrivals) against the closed-loop plateau. They differ where
  arrivals that bunch up cost the engine throughput (preemption in a KV-bound server, say).
* **The server's own speed**: the sweep's first saturated closed-loop level, measured again at the
  end of the profile. A server whose throughput moved between the two (a CPU-bound engine core on
  a busy host, other tenants on the GPU, clocks) moves its knee with it: no profile of it repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from lab.profile.knee import held
from lab.profile.schema import Knee, PercentileSlo, Step
from lab.profile.steps import percentile_key

# Two throughputs, or two mean TTFTs, agree within this share (TTFT: or within `_TTFT_SLACK` seconds).
AGREE: Final = 0.1
_TTFT_AGREE: Final = 0.25
_TTFT_SLACK: Final = 0.02


def _verdict(step: Step, key: str) -> str:
    interval = step.ttft_interval
    spread = f" [{interval[0] * 1000:.0f}-{interval[1] * 1000:.0f}]" if interval else ""
    window = f"{step.window_seconds:.0f}s, " if step.window_seconds else ""
    word = "held" if held(step) else "failed"
    if step.marginal:
        word += " (marginal: still undecided at its longest)"
    return f"{word} ({window}TTFT {key} {step.ttft_seconds.get(key, float('nan')) * 1000:.0f}ms{spread})"


def repeat_check(steps: Sequence[Step], knee: Knee, slo: PercentileSlo) -> str:
    """The knee's measurements and whether they agree."""
    key = percentile_key(slo.percentile)
    at = [s for s in steps if s.kind == "rate" and s.offered_rate == knee.rate]
    listed = "; ".join(_verdict(s, key) for s in at)
    if len(at) < 2:
        return (
            f"repeat at the knee: {knee.rate:.3g} req/s measured "
            f"once ({listed}): the budget did not hold a repeat"
        )
    agree = len({held(s) for s in at}) == 1
    outcome = "agree" if agree else "disagreed, so a longer step decided"
    return f"repeat at the knee: {knee.rate:.3g} req/s measured {len(at)} times: {listed}: {outcome}"


def ttft_check(steps: Sequence[Step], knee: Knee) -> str | None:
    """The client's mean TTFT at the knee against the server's histogram, or `None` without both."""
    at = [s for s in steps if s.kind == "rate" and s.offered_rate == knee.rate and s.server_ttft_mean_seconds]
    if not at:
        return None
    step = max(at, key=lambda s: s.window_seconds or 0.0)
    client, server = step.ttft_seconds.get("mean"), step.server_ttft_mean_seconds
    if client is None or server is None:
        return None
    gap = client - server
    agree = abs(gap) <= max(_TTFT_AGREE * server, _TTFT_SLACK)
    return (
        f"client vs server TTFT at the knee: mean {client * 1000:.1f}ms "
        f"against the server's {server * 1000:.1f}ms "
        f"(its histogram): {'agree' if agree else 'DIFFER'} ({gap * 1000:+.1f}ms: network, HTTP, streaming)"
    )


def completed(step: Step, output_tokens: float) -> float:
    """Requests per second a step completed: its generated tokens over the workload's mean output
    when the server counts them (completions come in lumps when requests finish together, the token
    counter moves every step), else its completions."""
    tokens = step.generation_tokens_per_second
    return tokens / output_tokens if tokens else step.achieved_rate


def drift_check(steps: Sequence[Step], output_tokens: float) -> str | None:
    """The closed-loop level measured twice (in the sweep and at the end), or `None` if none was."""
    closed = [s for s in steps if s.kind == "concurrency"]
    if not closed:
        return None
    last = closed[-1]
    earlier = [s for s in closed[:-1] if s.clients == last.clients]
    if not earlier:
        return "server speed: not measured again at the end (the budget ran out first)"
    before, after = completed(earlier[0], output_tokens), completed(last, output_tokens)
    agree = abs(after - before) <= AGREE * before
    verdict = (
        "agree"
        if agree
        else "DIFFER: the server's own speed moved during the profile, so its knee will not repeat"
    )
    return (
        f"server speed: {last.clients} clients (closed loop) completed {before:.3g} req/s in the sweep and "
        f"{after:.3g} at the end: {verdict} ({after / before - 1:+.0%})"
    )


def saturation_check(steps: Sequence[Step], saturated: float | None, output_tokens: float) -> str | None:
    """The open-loop throughput past saturation against the closed-loop plateau, or `None` when
    the profile did not get that far."""
    if not saturated:
        return None
    over = [s for s in steps if s.kind == "rate" and s.offered_rate > saturated]
    if not over:
        return "open vs closed loop saturation: no open-loop step past saturation (the budget ran out first)"
    done = completed(over[-1], output_tokens)
    step = over[-1]
    agree = abs(done - saturated) <= AGREE * saturated
    return (
        f"open vs closed loop saturation: {step.offered_rate:.3g} req/s offered completed {done:.3g} req/s, "
        f"the closed-loop plateau {saturated:.3g}: "
        f"{'agree' if agree else 'DIFFER'} ({done / saturated - 1:+.0%})"
    )


def checks(
    steps: Sequence[Step],
    knee: Knee | None,
    slo: PercentileSlo,
    saturated: float | None,
    output_tokens: float,
) -> list[str]:
    """Every check the steps allow, one line each."""
    lines = []
    if knee is not None:
        lines.append(repeat_check(steps, knee, slo))
        ttft = ttft_check(steps, knee)
        if ttft:
            lines.append(ttft)
    for line in (saturation_check(steps, saturated, output_tokens), drift_check(steps, output_tokens)):
        if line:
            lines.append(line)
    return lines
