"""The fidelity criteria between a server's sweep and its twin's (`lab.profile.twin.fidelity`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lab.profile.schema import Estimate, PercentileSlo, Step
from lab.profile.twin.fidelity import compare, queue_trend, render, same_trend
from tests.lab.profile.builders import step

SLO = PercentileSlo(0.5, 0.05, 0.9)


def _step(rate: float, running: float, ttft: float, *, verdict: str = "held", slope: float = 0.0) -> Step:
    base = step(rate, running=running, ttft=ttft)
    return replace(
        base,
        verdict=verdict,  # type: ignore[arg-type]
        window_seconds=30.0,
        waiting_slope=Estimate(slope, slope - 0.1, slope + 0.1),
    )


SERVER = [
    _step(10, 5.0, 0.05),
    _step(20, 11.0, 0.08),
    _step(30, 18.0, 0.3),
    _step(40, 26.0, 0.9, verdict="failed", slope=4.0),
]


def test_a_faithful_twin_passes_every_criterion() -> None:
    twin = [replace(s, running=s.running * 1.1) for s in SERVER]
    result = compare(SERVER, twin, SLO)
    assert result.ok
    assert (result.server_knee, result.twin_knee) == (30, 30)
    assert [round(r.running_error, 2) for r in result.rows] == [0.1] * 4


def test_a_twin_that_runs_too_few_requests_fails_the_running_criterion() -> None:
    twin = [replace(s, running=s.running * (0.8 if s.offered_rate == 20 else 1.0)) for s in SERVER]
    result = compare(SERVER, twin, SLO)
    assert not result.running_ok and not result.ok
    assert result.trend_ok and result.ttft_side_ok and result.knee_ok


def test_a_twin_that_never_queues_fails_trend_side_and_knee() -> None:
    """The old twin: it held at 1.33x the rate where the server's queue grew without end."""
    twin = [
        replace(
            s,
            verdict="held",
            waiting_slope=Estimate(0.0, -0.1, 0.1),
            ttft_seconds={"p50": 0.02, "p90": 0.03, "mean": 0.02},
        )
        for s in SERVER
    ]
    result = compare(SERVER, twin, SLO)
    assert not result.trend_ok and not result.knee_ok
    assert result.twin_knee == 40
    # Only the failed step is on the other side of the SLO, and it is next to the knee: allowed.
    assert result.ttft_side_ok
    lines = render(result, SLO)
    assert any("trends differ" in line for line in lines)
    assert lines[-1].startswith("FAIL") and "server 30 req/s, twin 40 req/s" in lines[-1]


def test_under_light_load_a_fraction_of_a_request_is_not_a_difference() -> None:
    """1.65 running against 1.4 is +18 % but a quarter of a request apart: close; 1.75 (0.35 apart)
    is not, nor 12 against 10 (+20 %, 2 requests)."""
    light = [_step(1, 1.4, 0.05)]
    assert compare(light, [replace(light[0], running=1.65)], SLO).running_ok
    assert not compare(light, [replace(light[0], running=1.75)], SLO).running_ok
    busy = [_step(10, 10.0, 0.05)]
    assert not compare(busy, [replace(busy[0], running=12.0)], SLO).running_ok


def test_two_steps_across_the_slo_fail_the_side_criterion() -> None:
    twin = [replace(s, ttft_seconds={"p50": 0.7, "p90": 0.7, "mean": 0.7}) for s in SERVER]
    assert not compare(SERVER, twin, SLO).ttft_side_ok


def test_the_sweeps_knee_is_the_highest_held_rate_below_the_lowest_failed() -> None:
    """A rate that held above a failure (a lucky minute near the knee) is not the sweep's knee."""
    server = [_step(30, 18, 0.3), _step(35, 20, 0.6, verdict="failed"), _step(40, 22, 0.4)]
    comparison = compare(server, server, SLO)
    assert (comparison.server_knee, comparison.twin_knee) == (30, 30)


def test_growth_is_material_growth_over_the_slopes_whole_interval() -> None:
    """At 40 req/s over 15 s material growth is 5 % of the arrivals, 2 requests a second: a slope of
    1 (0.9-1.1) is steady, 4 (3.9-4.1) growing, 2 (0.5-3.5) unclear."""
    assert queue_trend(_step(40, 20, 0.1, slope=1.0)) == "steady"
    assert queue_trend(_step(40, 20, 0.1, slope=4.0)) == "growing"
    straddling = replace(_step(40, 20, 0.1), waiting_slope=Estimate(2.0, 0.5, 3.5))
    assert queue_trend(straddling) == "unclear"


def test_an_unclear_trend_disagrees_with_neither_kind() -> None:
    """Near the knee a minute's queue can read either way on either side (CI's emulator at 1.2x its
    knee: +0.18/s against its twin's +0.39/s, the bound 0.38): only two clear kinds that differ fail
    the criterion."""
    steady, growing = _step(40, 20, 0.1, slope=1.0), _step(40, 20, 0.1, slope=4.0)
    unclear = replace(steady, waiting_slope=Estimate(2.0, 0.5, 3.5))
    assert same_trend(unclear, steady) and same_trend(growing, unclear) and same_trend(steady, steady)
    assert not same_trend(steady, growing)


def test_sweeps_of_other_rates_cannot_be_compared() -> None:
    with pytest.raises(ValueError, match="same rates"):
        compare(SERVER, SERVER[:3], SLO)
