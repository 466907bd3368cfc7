"""How a run names itself: the banner, the HPA as every output prints it, the summary file's settings.

One text for the HPA under test (`hpa_text`), with targets in the cluster's units (`settings.target_text`),
so that the banner, the summary, the picture's title and the summary file never disagree.
"""

from __future__ import annotations

import dataclasses

from lab.demo.settings import TARGET_UNITS, DemoSettings, target_text
from lab.hpa import HPASpec


def first_target(spec: HPASpec) -> str:
    """The HPA's first metric and its target: the picture's title, and the start of the summary's policy."""
    first = spec.metrics[0]
    return target_text(first.name, first.target_type, first.target)


def hpa_text(settings: DemoSettings, spec: HPASpec) -> str:
    """The HPA under test: its metrics and targets, the replica range, the scale-down window, and the
    decision lab's name for it when the demo chose it."""
    s = settings
    metrics = " + ".join(target_text(m.name, m.target_type, m.target) for m in spec.metrics)
    chosen = f" ({s.policy}, recommended for this day)" if s.policy else ""
    return (
        f"{metrics}, {s.minimum}-{s.max_replicas} replicas, scale-down window {s.stabilization:g} s{chosen}"
    )


def banner(settings: DemoSettings, spec: HPASpec, capacity: float, url: str) -> str:
    """What the run is about to do, printed before it starts."""
    s = settings
    queue = f"\n  queue: {s.upstream.name} (+ -dlq), exporter in CloudWatch names" if s.upstream else ""
    pace = (
        f"at {s.scale:g}x = {s.profile.duration / s.scale:.0f}s of wall time"
        if s.real_time
        else "on virtual time: as fast as the CPU allows, the same run for the same seed"
    )
    return (
        f"vllm-autoscale demo: profile {s.profile.name!r} ({s.profile.duration:g}s emulated {pace}), "
        f"capacity {capacity:.2f} req/s per replica\n"
        f"  HPA: {hpa_text(s, spec)}\n"
        f"  sync {s.sync_period:g}s, tolerance {s.tolerance:g}, cold start {s.load_delay:g}s, "
        f"Kubernetes {s.kubernetes_version}\n"
        f"  adapter: {url} (scrape source, insecure loopback){queue}"
    )


def describe(settings: DemoSettings, spec: HPASpec, capacity: float, target: float) -> dict[str, object]:
    """The run's settings for the summary file; `target` is in the cluster's units (`target_unit`)."""
    s = settings
    return {
        "profile": s.profile.name,
        "metric": s.metric_name,
        "target_type": s.target_type,
        "target": target,
        "target_unit": TARGET_UNITS.get(s.metric_name, ""),
        "policy": s.policy,
        "hpa_metrics": [dataclasses.asdict(m) for m in spec.metrics],
        "engine": s.engine,
        "engine_params": dataclasses.asdict(s.params),
        "capacity_rps_per_replica": capacity,
        "time_scale": s.scale,
        "scrape_interval": s.scrape_interval,
        "sync_period": s.sync_period,
        "tolerance": s.tolerance,
        "downscale_stabilization": s.stabilization,
        "cold_start": s.load_delay,
        "min_replicas": s.minimum,
        "max_replicas": s.max_replicas,
        "kubernetes_version": s.kubernetes_version,
        "queue": None if s.upstream is None else dataclasses.asdict(s.upstream),
        "seed": s.seed,
    }
