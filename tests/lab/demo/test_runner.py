"""The demo's wiring: which replicas are scraped, the adapter's settings, the default target, capacity."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from lab.demo.capacity import ENGINES, measure_capacity
from lab.demo.cluster.embedded import FleetDiscovery, adapter_config
from lab.demo.loadgen import SCENARIOS, Scenario, Stage, arrivals
from lab.demo.runner import Demo
from lab.demo.settings import DemoSettings
from lab.emulator import Engine, EngineParams, Request


def settings(tmp_path: Path, **changes: object) -> DemoSettings:
    values: dict[str, object] = {
        "profile": SCENARIOS["smoke"],
        "out": tmp_path,
        "capacity": 1.0,
        "time_scale": 1.0,
    }
    values.update(changes)
    return DemoSettings(**values)  # type: ignore[arg-type]


async def test_only_ready_replicas_are_scrape_targets(tmp_path: Path) -> None:
    """Scrape targets are the Ready replicas only, as an EndpointSlice lists only ready endpoints: a replica
    in its cold start refuses connections and would fail every scrape round (DESIGN.md §4)."""
    demo = Demo(settings(tmp_path), io.StringIO())
    fleet = demo.fleet
    try:
        ready = await fleet.add_replica(load_delay=0.0)
        await ready.wait_ready()
        await fleet.add_replica(load_delay=3600.0)
        targets = FleetDiscovery(fleet, "team-a").targets()
        assert [t.url for t in targets] == [ready.metrics_url]
        assert targets[0].namespace == "team-a"
        assert ("namespace", "team-a") in targets[0].labels
    finally:
        await fleet.stop()


def test_adapter_config_is_the_scrape_source_on_insecure_loopback() -> None:
    """The adapter runs as DESIGN.md §4 says: scrape source, plain HTTP, loopback only, and a staleness limit
    several scrape intervals long."""
    config = adapter_config("team-a", 0.5)
    assert config.source == "scrape"
    assert (config.server.address, config.server.insecure_serving) == ("127.0.0.1", True)
    assert config.scrape.timeout <= config.scrape.interval == 0.5
    assert config.scrape.max_age >= 4 * config.scrape.interval
    assert config.scrape.namespace == "team-a"


@pytest.mark.parametrize(
    ("target_type", "target", "expected"),
    [
        pytest.param("AverageValue", None, 12.0, id="AverageValue defaults to 0.75 x max_num_seqs"),
        pytest.param("Value", None, 1.0, id="Value defaults to 1"),
        pytest.param("AverageValue", 20.0, 20.0, id="an explicit target wins"),
    ],
)
def test_default_target(tmp_path: Path, target_type: str, target: float | None, expected: float) -> None:
    """The default AverageValue target follows DESIGN.md's recommendation for vllm_requests_inflight."""
    chosen = settings(tmp_path, metric="vllm_requests_inflight", target_type=target_type, target=target)
    assert chosen.target_value(1.0) == expected


def test_a_profile_through_a_queue_scales_on_the_queue_from_zero(tmp_path: Path) -> None:
    """zero-idle: the queue, `queue_depth` with a target of what one replica drains in one cold start
    (capacity x cold start), minReplicas 0, and replicas loaded at the start for the evening's load."""
    zero = settings(tmp_path, profile=SCENARIOS["zero-idle"], time_scale=None)
    assert zero.upstream is not None and zero.upstream.name == "inference-requests"
    assert (zero.metric_name, zero.minimum, zero.start_replicas) == ("queue_depth", 0, 2)
    assert zero.target_value(1.44) == float(int(1.44 * zero.load_delay))
    direct = settings(tmp_path)
    assert (direct.upstream, direct.metric_name, direct.minimum) == (None, "vllm_request_rate_forecast", 1)


def test_the_queue_hpa_also_keeps_busy_replicas_on_in_flight_requests(tmp_path: Path) -> None:
    """While consumers keep up the visible queue is empty; the in-flight metric keeps the replicas they
    are busy on. Its target is the consumers' concurrency, so it never asks for more than are Ready."""
    demo = Demo(settings(tmp_path, profile=SCENARIOS["zero-idle"]), io.StringIO())
    names = [(m.name, m.target_type, m.target) for m in demo.controller.spec.metrics]
    assert names == [("queue_depth", "AverageValue", "60"), ("vllm_requests_inflight", "AverageValue", "12")]
    assert demo.controller.spec.min_replicas == 0
    assert demo.upstream is not None and demo.upstream.pool.concurrency == 12


def test_the_anticipating_hpa_scales_on_the_forecast_with_in_flight_as_its_guard(tmp_path: Path) -> None:
    """The forecast's target is the knee's rate per replica over 1 + tolerance, per second of the
    cluster's (emulated) clock whatever the time scale: the HPA reads the adapter's rate converted
    (`ExternalMetricsClient.rates`), so banner, summary, picture and CSV print the cluster's number;
    in-flight guards it, at 0.75 x max_num_seqs unless a guard is given."""
    forecast = settings(tmp_path, metric="vllm_request_rate_forecast", time_scale=10.0)
    assert forecast.target_value(1.44) == pytest.approx(0.9 * 1.44 / 1.1)
    guarded = Demo(settings(tmp_path, metric="vllm_request_rate_forecast", guard=5.4), io.StringIO())
    assert guarded.controller.spec.metrics[1].target == "5.4"
    demo = Demo(forecast, io.StringIO())
    names = [(m.name, m.target_type) for m in demo.controller.spec.metrics]
    assert names == [
        ("vllm_request_rate_forecast", "AverageValue"),
        ("vllm_requests_inflight", "AverageValue"),
    ]


def test_the_demo_defaults_to_the_anticipating_policy_and_its_scale_down_window(tmp_path: Path) -> None:
    """Settings without `--metric` name the anticipating policy, guarded by in-flight 0.75 x
    max_num_seqs, with the scale-down window of the history its forecast reads (120 s, never longer
    than the profile's); an explicit window, and every other metric, keep the profile's. (A run
    replaces this with the decision lab's recommendation for its day, `lab.demo.decision.choice`, before it
    starts: tests/integration/test_demo_default.py.)"""
    default = settings(tmp_path, profile=SCENARIOS["default"])
    assert default.metric_name == "vllm_request_rate_forecast"
    assert default.stabilization == 120.0 < SCENARIOS["default"].downscale_stabilization
    demo = Demo(default, io.StringIO())
    assert [(m.name, m.target) for m in demo.controller.spec.metrics][1] == ("vllm_requests_inflight", "12")
    assert demo.controller.settings.downscale_stabilization == 120.0
    assert settings(tmp_path).stabilization == 60.0  # smoke: its own window is shorter
    explicit = settings(tmp_path, profile=SCENARIOS["default"], downscale_stabilization=300.0)
    assert explicit.stabilization == 300.0
    inflight = settings(tmp_path, profile=SCENARIOS["default"], metric="vllm_requests_inflight")
    assert inflight.stabilization == 300.0


def test_min_replicas_zero_needs_a_cluster_with_hpa_scale_to_zero(tmp_path: Path) -> None:
    """The API server admits minReplicas 0 only with HPAScaleToZero, on by default from Kubernetes 1.37."""
    with pytest.raises(ValueError, match="HPAScaleToZero"):
        Demo(settings(tmp_path, profile=SCENARIOS["zero-idle"], kubernetes_version="1.36"), io.StringIO())


def test_a_run_that_may_scale_to_zero_has_a_min_replicas_one_baseline(tmp_path: Path) -> None:
    zero = Demo(settings(tmp_path, profile=SCENARIOS["zero-idle"]), io.StringIO())
    baseline = zero.baseline()
    assert baseline is not None
    assert (baseline.settings.minimum, baseline.settings.baseline) == (1, False)
    assert baseline.settings.out == tmp_path / "baseline" and baseline.capacity == zero.capacity
    assert baseline.baseline() is None
    assert (
        Demo(settings(tmp_path, profile=SCENARIOS["zero-idle"], baseline=False), io.StringIO()).baseline()
        is None
    )
    assert Demo(settings(tmp_path), io.StringIO()).baseline() is None


def overload_throughput(params: EngineParams, rate: float, duration: float = 900.0) -> float:
    """Completions per second over the last two thirds of a Poisson overload."""
    engine = Engine(params, seed=1)
    done: list[Request] = []
    for a in arrivals(Scenario("over", (Stage("over", duration, 1.0),), ""), rate, seed=2):
        engine.run_until(a.at)
        engine.submit(a.prompt_tokens, a.max_tokens, ignore_eos=True, at=a.at, on_finish=done.append)
    engine.run_until(duration)
    return sum(1 for r in done if r.finished and r.finished > duration / 3) / (duration * 2 / 3)


def test_measured_capacity_is_what_an_overloaded_replica_completes() -> None:
    """`measure_capacity` (a saturated backlog) agrees within 10 % with the throughput of a replica under a
    Poisson overload at twice that rate, and is deterministic."""
    params = ENGINES["demo"]
    capacity = measure_capacity(params)
    assert capacity == measure_capacity(params)
    assert overload_throughput(params, 2 * capacity) == pytest.approx(capacity, rel=0.1)
