"""Verdicts: supported, rejected and open by the rules, each with its reason; the cheapest supported wins."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lab.backtest.calibration import Estimate
from lab.backtest.decision import Decision, Rules, decide
from lab.backtest.outcome import Scorecard
from lab.backtest.policy import FORECAST, Forecast, Policy

CAPACITY = Estimate(30.0, 27.0, 33.0, "fitted")
BASE = Scorecard(
    name="x",
    description="",
    kind="candidate",
    capacity=30.0,
    requests=10000,
    slo_attainment=0.995,
    ttft_attainment=0.995,
    tpot_attainment=1.0,
    ttft_p90=0.02,
    ttft_p99=0.2,
    gpu_hours=10.0,
    replica_minutes=600.0,
    scale_events=4,
    oscillations=0,
    peak_replicas=4,
    dropped=0.0,
    in_flight_end=0.0,
    seconds=3600.0,
)


def _candidate(
    name: str, estimate: float, pessimistic: float, optimistic: float, hours: float = 10.0
) -> tuple[Policy, tuple[Scorecard, Scorecard, Scorecard]]:
    def at(slo: float) -> Scorecard:
        return replace(BASE, name=name, slo_attainment=slo, ttft_attainment=slo, gpu_hours=hours)

    return Policy(name), (at(estimate), at(pessimistic), at(optimistic))


def _decide(
    *candidates: tuple[Policy, tuple[Scorecard, Scorecard, Scorecard]],
    requests: float = 10000,
    gap_share: float = 0.0,
) -> Decision:
    return decide(
        [c[0] for c in candidates],
        [c[1] for c in candidates],
        CAPACITY,
        Rules(),
        requests=requests,
        gap_share=gap_share,
    )


def test_each_verdict_with_its_reason() -> None:
    decision = _decide(
        _candidate("good", 0.999, 0.995, 1.0),
        _candidate("bad", 0.912, 0.80, 0.95),
        _candidate("unsure", 0.993, 0.97, 0.999),
    )
    verdicts = {j.policy.name: (j.verdict, j.reason) for j in decision.judged}
    assert verdicts["good"][0] == "supported" and "down to 27 req/s per replica" in verdicts["good"][1]
    assert verdicts["bad"] == ("rejected", "TTFT SLO 91.2 % < 99.0 % (95.0 % even at 33 req/s per replica)")
    assert verdicts["unsure"][0] == "open" and "the capacity's uncertainty decides" in verdicts["unsure"][1]
    assert decision.recommended is not None and decision.recommended.policy.name == "good"


def test_too_few_requests_leave_every_candidate_open() -> None:
    decision = _decide(_candidate("good", 1.0, 1.0, 1.0), requests=400)
    assert decision.judged[0].verdict == "open"
    assert decision.judged[0].reason == "fewer than 1000 requests in the window (400)"
    assert decision.recommended is None


def test_a_range_mostly_missing_decides_nothing() -> None:
    decision = _decide(_candidate("good", 1.0, 1.0, 1.0), gap_share=0.3)
    assert decision.judged[0].verdict == "open" and "gaps cover 30.0 %" in decision.judged[0].reason


def test_meeting_the_slo_at_a_far_higher_cost_is_rejected_and_the_cheapest_recommended() -> None:
    decision = _decide(
        _candidate("lavish", 1.0, 1.0, 1.0, hours=40.0), _candidate("lean", 0.999, 0.995, 1.0, hours=12.0)
    )
    verdicts = {j.policy.name: j for j in decision.judged}
    assert verdicts["lavish"].verdict == "rejected"
    assert "costs 3.3x the GPU-hours of lean" in verdicts["lavish"].reason
    assert decision.recommended is verdicts["lean"]


def test_the_foresight_bound_is_a_reference_not_a_candidate() -> None:
    bound = (Policy("foresight", kind="foresight"), _candidate("foresight", 1.0, 1.0, 1.0, hours=1.0)[1])
    decision = _decide(bound, _candidate("good", 1.0, 1.0, 1.0))
    assert decision.judged[0].verdict == "reference"
    assert decision.recommended is not None and decision.recommended.policy.name == "good"
    assert decision.count("supported") == 1


@pytest.mark.parametrize("slo", [0.99, 0.989999])
def test_the_target_is_inclusive(slo: float) -> None:
    decision = _decide(_candidate("edge", slo, slo, slo))
    assert decision.judged[0].verdict == ("supported" if slo >= 0.99 else "rejected")


def _kind(
    kind: str, candidate: tuple[Policy, tuple[Scorecard, Scorecard, Scorecard]]
) -> tuple[Policy, tuple[Scorecard, Scorecard, Scorecard]]:
    policy, outcomes = candidate
    return replace(policy, kind=kind, replicas=3 if kind == "fixed" else None), outcomes  # type: ignore[arg-type]


def test_cost_ratios_are_to_the_foresight_bound() -> None:
    """Every policy's cost is its GPU-hours over foresight's; the bound is never recommended."""
    decision = _decide(
        _kind("foresight", _candidate("foresight", 1.0, 1.0, 1.0, hours=8.0)),
        _candidate("good", 0.999, 0.995, 1.0, hours=10.0),
    )
    by_name = {j.policy.name: j for j in decision.judged}
    assert decision.foresight is by_name["foresight"]
    assert decision.cost_ratio(by_name["good"]) == pytest.approx(1.25)
    assert decision.recommended is by_name["good"]
    assert decision.cheapest_meeting() is by_name["good"]


def test_only_standing_headroom_meets_the_slo_when_the_reactive_bound_misses() -> None:
    """The reactive bound (the present known at once) and the anticipating policy miss the target, a
    low in-flight target meets it: the record says only headroom meets it, and names the cheapest."""
    forecast = Forecast(horizon=75.0)
    anticipate = _candidate("anticipate", 0.95, 0.93, 0.97, hours=6.0)
    anticipate = (replace(anticipate[0], metric=FORECAST, forecast=forecast), anticipate[1])
    decision = _decide(
        _kind("reactive", _candidate("reactive-bound", 0.96, 0.96, 0.96, hours=5.0)),
        anticipate,
        _candidate("inflight-4", 0.992, 0.99, 0.995, hours=12.0),
        _kind("fixed", _candidate("fixed", 0.999, 0.995, 1.0, hours=14.0)),
    )
    assert decision.headroom_only()
    best = decision.cheapest_meeting()
    assert best is not None and best.policy.name == "inflight-4"
    held = _decide(_kind("reactive", _candidate("reactive-bound", 0.995, 0.995, 0.995)), anticipate)
    assert not held.headroom_only()
