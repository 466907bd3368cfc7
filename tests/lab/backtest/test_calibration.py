"""Capacity and the service model: fitted from recorded data, read from a profile, or given."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lab.backtest.calibration import CalibrationError, ServiceModel, fit, given
from lab.backtest.history import History
from lab.backtest.inputs.profile_calibration import from_profile
from lab.backtest.inputs.trace_file import read_trace
from lab.backtest.policy import Saturation, SweepSettings, builtin_sweep
from lab.load.server import Server
from lab.load.workload import Distribution, Workload
from lab.profile.schema import Knee, PercentileSlo, Profile, Step, dump, load
from tests.lab.backtest.tsdb import REAL


def test_capacity_is_fitted_where_the_real_servers_queue_grew() -> None:
    """The real run's saturated stages completed 28.8-32.4 req/s (load-stages.csv): the fit is their
    median with that band; the unsaturated stages give the batch-time shape and the unloaded TTFT."""
    cal = fit(read_trace(REAL / "load-stages.csv"))
    assert cal.capacity.value == pytest.approx(29.0, abs=0.5)
    assert cal.capacity.low == pytest.approx(28.8, abs=0.3)
    assert cal.capacity.high == pytest.approx(32.35, abs=0.3)
    assert "growing queue" in cal.capacity.method
    assert 24 < cal.model.slots < 28  # ~26 running when the KV cache was full
    assert 0.015 < cal.model.ttft_base < 0.03  # TTFT p50 16-20 ms unloaded
    assert "fitted" in cal.methods["shape"]


def test_a_trace_of_arrivals_alone_cannot_be_fitted() -> None:
    history = History(step=1.0, arrivals=(1.0, 2.0, 3.0), source="trace t.csv")
    with pytest.raises(
        CalibrationError,
        match=r"trace t.csv: it records no completions \(pass --profile FILE or --capacity RPS\)",
    ):
        fit(history)


def test_a_queue_that_never_grew_says_so() -> None:
    steady = (5.0,) * 10
    history = History(
        step=1.0,
        arrivals=steady,
        completions=steady,
        running=(3.0,) * 10,
        waiting=(0.0,) * 10,
        replicas=(1.0,) * 10,
        source="x",
    )
    with pytest.raises(CalibrationError, match=r"the queue grew in 0 steps \(need 3\)"):
        fit(history)


def _step(rate: float, achieved: float, running: float, waiting: float, stable: bool) -> Step:
    return Step(
        offered_rate=rate,
        achieved_rate=achieved,
        concurrency=running + waiting,
        running=running,
        waiting=waiting,
        kv_usage=min(1.0, running * 0.04),
        preemptions=0.0,
        ttft_seconds={"p50": 0.02 + waiting * 0.01},
        tpot_seconds={},
        e2e_seconds={},
        server_ttft_seconds=None,
        server_tpot_seconds=None,
        requests=500,
        queue_stable=stable,
        slo_met=stable,
    )


def _profile() -> Profile:
    return Profile(
        server=Server("0.26.0", "m", 32, 2048, 16),
        workload=Workload(Distribution(1000.0), Distribution(250.0)),
        slo=PercentileSlo(0.5, 0.05),
        steps=(
            _step(5, 5, 3, 0, True),
            _step(10, 10, 7, 0, True),
            _step(15, 15, 12, 0, True),
            _step(25, 20.5, 24, 30, False),
            _step(30, 21.5, 25, 80, False),
        ),
        knee=Knee(15, 12, 0.48, 0.02, 0.003),
        tpot_vs_batch=(),
        prefill_seconds_per_token=None,
        targets={},
        complete=True,
    )


def test_a_profile_gives_capacity_from_its_saturated_steps() -> None:
    cal = from_profile(_profile(), "p.json")
    assert cal.capacity.value == pytest.approx(21.0)
    assert (cal.capacity.low, cal.capacity.high) == (20.5, 21.5)
    assert cal.model.slots == 25
    assert cal.model.output_tokens == 250
    assert cal.model.ttft_base == pytest.approx(0.02)


def test_a_given_capacity_has_no_band() -> None:
    cal = given(12.0)
    assert cal.capacity.low == cal.capacity.high == 12.0
    assert "given" in cal.capacity.method


def test_the_model_runs_a_full_batch_exactly_at_capacity() -> None:
    """Little's law: taking capacity per second, a replica runs its slots; the knee is below them."""
    model = ServiceModel(capacity=30.0, slots=27.0, shape=19.4)
    assert model.batch_at(30.0) == pytest.approx(27.0)
    assert model.batch_at(29.999) == pytest.approx(27.0, rel=1e-3)
    assert 0 < model.knee_inflight() < 27
    assert model.duration(0) < model.duration(27) == pytest.approx(27 / 30)


def test_a_profiles_standing_queue_throughput_and_saturation_parameters_are_used(tmp_path: Path) -> None:
    """A profile that measured throughput with a standing queue (its concurrency sweep) gives the
    capacity; its vllm_saturation parameters go to the saturation candidate. Read back from the file."""
    profile = replace(
        _profile(),
        saturated_rate=22.0,
        saturation={"capacity": 14.0, "kv_target": 0.9},
        cold_start_seconds=95.0,
    )
    path = tmp_path / "profile.json"
    dump(profile, path)
    cal = from_profile(load(path), str(path))
    assert cal.capacity.value == 22.0
    assert (cal.capacity.low, cal.capacity.high) == (20.5, 22.0)
    assert "standing queue" in cal.capacity.method
    assert cal.saturation == {"capacity": 14.0, "kv_target": 0.9}
    sweep = builtin_sweep(cal.model, SweepSettings(), peak_rate=40.0, saturation=cal.saturation)
    saturation = next(p for p in sweep if p.metric == "vllm_saturation")
    assert saturation.saturation == Saturation(14.0, 0.9, None)


def test_a_profiles_run_is_a_trace_whose_saturated_steps_give_the_capacity(tmp_path: Path) -> None:
    """`--trace profile.json`: the steps in order on a 1 s grid, one replica; the fit reads the
    saturated steps' throughput."""
    path = tmp_path / "profile.json"
    dump(_profile(), path)
    history = read_trace(path)
    assert history.replicas is not None and set(history.replicas) == {1.0}
    assert (
        len(history.arrivals) == 100 + 50 + 33 + 20 + 17
    )  # 500 requests per step at 5, 10, 15, 25, 30 req/s
    assert history.arrivals[0] == 5 and history.arrivals[-1] == 30
    assert fit(history).capacity.value == pytest.approx(21.0, abs=0.6)


def test_the_knee_for_the_slo_is_below_saturation_where_tpot_binds() -> None:
    """The knee is where a replica's batch still holds the TPOT objective, at most 90 % of capacity;
    a looser objective moves it up to the queue's bound, a profile's measured knee wins."""
    cal = given(1.44)
    tight, why = cal.knee_rate(0.05)
    assert tight < 0.9 * 1.44 and "TPOT" in why
    assert cal.model.tpot(cal.model.batch_at(tight)) <= 0.05
    loose, why = cal.knee_rate(1.0)
    assert loose == pytest.approx(0.9 * 1.44) and "0.9 x capacity" in why
    measured, why = replace(cal, knee=1.0).knee_rate(0.05)
    assert measured == 1.0 and "profile" in why


def test_a_profiles_knee_is_the_knee_foresight_sizes_at(tmp_path: Path) -> None:
    """A complete profile's knee (the highest rate that held its SLO) becomes the calibration's knee."""
    path = tmp_path / "profile.json"
    dump(_profile(), path)
    cal = from_profile(load(path), str(path))
    profile_knee = _profile().knee
    assert profile_knee is not None
    rate, why = cal.knee_rate(0.05)
    assert rate == profile_knee.rate and "profile" in why
