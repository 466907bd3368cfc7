"""The files of a profile: complete or partial, never a knee that was not measured."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from lab.load.workload import fixed
from lab.profile.output.figure import figure
from lab.profile.output.report import build, summary, write
from lab.profile.schema import load
from lab.profile.settings import Run, Settings
from lab.profile.twin.model import ModelKnee
from tests.lab.profile.builders import SLO, step

SETTINGS = Settings(url="http://x", model="m", workload=fixed(128, 32), slo=SLO, time_scale=10.0)
STEPS = [
    step(1.0, kind="concurrency", running=1.0, tpot=0.011, clients=1),
    step(4.0, kind="concurrency", running=4.0, tpot=0.02, clients=4),
    step(2.0, running=2.0, kv=0.2),
    step(4.0, running=4.0, waiting=1.0, kv=0.4),
    step(5.0, held=False),
]


def test_a_complete_run_has_its_knee_targets_and_notes(tmp_path: Path) -> None:
    profile = build(SETTINGS, Run(steps=STEPS, saturated_rate=5.2, prefill_seconds_per_token=1e-4))
    assert profile.complete and profile.error is None
    assert profile.knee is not None and profile.knee.rate == 4.0
    assert profile.tpot_vs_batch == ((1.0, 0.011), (4.0, 0.02))
    assert profile.saturation == {"capacity": 5.0, "queue_target": 1.0, "kv_target": 0.4}
    assert any("time scale 10" in note for note in profile.notes)
    written = write(tmp_path, profile, title="t")
    assert {p.name for p in written} == {"profile.json", "summary.txt", "profile.png", "saturation.yaml"}
    assert load(tmp_path / "profile.json") == profile
    text = summary(profile)
    assert (
        "knee: 4 req/s per replica (the highest rate that "
        "held; the band reaches 23% above it, to 4.94 req/s, "
        "95% of the saturated throughput" in text
    )
    assert "5.0 in flight" in text
    assert "    vllm_saturation:\n      capacity: 5" in text
    assert "check: repeat at the knee: 4 req/s measured once" in text
    assert "check: open vs closed loop saturation: no open-loop step past saturation" in text


def test_the_band_says_what_closes_it() -> None:
    """A failure whose step ended marginal is a rate where the server flips; where the stable share of
    saturation lies below the lowest failure, it closes the band (the search bisects below it)."""
    text = summary(build(SETTINGS, Run(steps=STEPS, saturated_rate=6.0)))
    assert "the band reaches 25% above it, to 5 req/s, the lowest rate that failed: ±12.5%)" in text
    flipped = [*STEPS[:-1], replace(STEPS[-1], marginal=True)]
    text = summary(build(SETTINGS, Run(steps=flipped, saturated_rate=6.0)))
    assert "to 5 req/s, the lowest rate that failed (marginal there: the server itself flips" in text
    text = summary(build(SETTINGS, Run(steps=STEPS, saturated_rate=4.4)))
    assert (
        "the band reaches 4% above it, to 4.18 req/s, 95% of the saturated throughput, above which no rate "
        "holds (the lowest rate that failed: 5): ±2.2%" in text
    )


def test_a_run_that_stopped_keeps_its_steps_and_no_knee(tmp_path: Path) -> None:
    """An error before the steps bracketed the knee: complete false, the error, no targets."""
    profile = build(SETTINGS, Run(steps=STEPS[:3], error="the budget of 10s ran out"))
    assert not profile.complete and profile.knee is None and profile.targets == {}
    assert profile.error == "the budget of 10s ran out"
    assert {p.name for p in write(tmp_path, profile, title="t")} == {
        "profile.json",
        "summary.txt",
        "profile.png",
    }
    assert "no knee: the budget of 10s ran out" in summary(profile)


def test_an_error_after_the_knee_keeps_the_knee_but_not_complete() -> None:
    """The knee was bracketed before the failure: it is measured, so it stays; the profile is partial."""
    profile = build(SETTINGS, Run(steps=STEPS, error="unable to read http://x/metrics: reset"))
    assert profile.knee is not None and not profile.complete
    assert "partial: unable to read" in summary(profile)


def test_without_a_failing_step_there_is_no_knee() -> None:
    profile = build(SETTINGS, Run(steps=STEPS[:3]))
    assert not profile.complete and profile.error == "the steps did not bracket a knee"


def test_an_unreached_server_is_described_by_what_was_asked() -> None:
    profile = build(SETTINGS, Run(error="unable to reach http://x/metrics: refused"))
    assert (profile.server.vllm_version, profile.server.model) == ("unknown", "m")


def _values(data: object) -> list[float]:
    return [float(v) for v in np.asarray(data, dtype=float)]


def test_the_picture_marks_the_knee_and_the_slo() -> None:
    """The knee is a vertical line at its rate on the three rate panels; both SLOs are horizontal lines."""
    profile = build(SETTINGS, Run(steps=STEPS, saturated_rate=5.2))
    drawn = figure(profile, title="t")
    try:
        throughput, latency, server, batch = drawn.axes[:4]
        for axis in (throughput, latency, server):
            assert any(_values(line.get_xdata()) == [4.0, 4.0] for line in axis.get_lines())
        flat = [_values(line.get_ydata()) for line in latency.get_lines()]
        assert [500.0, 500.0] in flat and [50.0, 50.0] in flat
        points = batch.get_lines()[0]
        assert (_values(points.get_xdata()), _values(points.get_ydata())) == ([1.0, 4.0], [11.0, 20.0])
    finally:
        plt.close(drawn)


def test_the_cross_check_names_a_slow_path_and_other_clients() -> None:
    """Client TTFT against the server's own, below saturation: a gap of more than a plain round trip
    (in real seconds) is something in between; a server slower than its client counts other requests."""
    settings = Settings(url="http://x", model="m", workload=fixed(128, 32), slo=SLO, time_scale=10.0)
    far = [step(2.0, ttft=0.5, server_ttft_mean=0.1), step(3.0, held=False)]
    notes = build(settings, Run(steps=far)).notes
    assert any("the client waits 40ms (real) longer than the server counts" in n for n in notes)
    near = [step(2.0, ttft=0.11, server_ttft_mean=0.1), step(3.0, held=False)]
    assert not any("longer than the server counts" in n for n in build(settings, Run(steps=near)).notes)
    shared = [step(2.0, ttft=0.05, server_ttft_mean=0.1), step(3.0, held=False)]
    assert any("also counts other clients' requests" in n for n in build(settings, Run(steps=shared)).notes)


# The six-second engine's model knee, its band, and its check at the lower end (docs/benchmarks.md).
MODEL = ModelKnee(0.87, 0.839, 0.913)
MODELLED = [
    step(1.0, kind="concurrency", running=1.0, tpot=0.011, clients=1),
    step(8.0, kind="concurrency", running=8.0, tpot=0.046, clients=8),
]


def test_a_marginal_check_leaves_the_model_knee_standing_and_says_so() -> None:
    """Seed 1 of the six-second engine: the check at 0.839 req/s ended marginal, failed by its point
    estimate (miss share 0.101 against 0.10, interval [0.016, 0.187]): the model's knee stands."""
    check = replace(step(0.839, held=False), verdict="failed", marginal=True)
    profile = build(
        SETTINGS, Run(steps=[*MODELLED, check], saturated_rate=1.36, model_knee=MODEL.checked(check))
    )
    assert profile.knee is not None and (profile.knee.rate, profile.knee.failed_rate) == (0.839, 0.913)
    assert profile.complete
    assert "ended marginal" in summary(profile) and "refuted" not in summary(profile)


def test_a_refuted_model_gives_way_to_the_highest_rate_the_open_loop_held() -> None:
    check = replace(step(0.839, held=False), verdict="failed")
    below = replace(step(0.612), verdict="held")
    model = MODEL.checked(check)
    assert model.check == "refuted"
    profile = build(SETTINGS, Run(steps=[*MODELLED, check, below], saturated_rate=1.36, model_knee=model))
    assert profile.knee is not None and (profile.knee.rate, profile.knee.failed_rate) == (0.612, 0.839)
    assert profile.knee.model is None, "an open-loop knee"
    text = summary(profile)
    assert (
        "the highest rate that held" in text and "model's knee 0.839 req/s" in text and "was refuted" in text
    )
    alone = build(SETTINGS, Run(steps=[*MODELLED, check], saturated_rate=1.36, model_knee=model))
    assert alone.knee is None and alone.error is not None and "refuted" in alone.error
