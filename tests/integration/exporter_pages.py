"""The pages the dashboard query tests let a real Prometheus scrape: vLLM pods derived from a real
vLLM 0.26.0 capture (aggregated pods, and the prefill and decode pods of a disaggregated model),
kube-state-metrics, the DCGM exporter, the CloudWatch exporter (SQS) and the adapter's own registry,
each a function rendering the page at the moment of the scrape.

Series names come from `adapter.vocabulary.vllm`, `adapter.vocabulary.exporters` and `adapter.telemetry`, as
the dashboards'.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import generate_latest

from adapter.telemetry import Telemetry
from adapter.vocabulary import exporters, vllm
from adapter.vocabulary.catalogue import BUILTIN, FORECAST, SATURATION
from alerts.disaggregated import EXTERNAL_KV_TRANSFER, LOCAL_COMPUTE
from alerts.params import Params
from dashboards.queries import vllm_engine

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "metrics-overloaded.prom"
FAST_MODEL = "llama-1b-dummy"  # the captured server's served name
SLOW_MODEL = "llama-8b"
#: a disaggregated model: a prefill and a decode Deployment (the chart's `<name>-prefill` and `-decode`)
PD_MODEL, PD_NAME = "llama-70b", "vllm-70b"
_PARAMS = Params()
#: the Prometheus label the chart's PodMonitor copies from the pods' `llm-d.ai/role`, and its values
ROLE_LABEL, PREFILL, DECODE = _PARAMS.role_label, _PARAMS.prefill_role, _PARAMS.decode_role
#: a healthy decode pool computes this share of its prompt tokens itself (failed hand-overs); the rest
#: arrives through the KV connector
RECOMPUTED_SHARE = 0.05
#: requests a decode engine is receiving KV for, per stage of `vllm.KV_FETCH_STAGES`
KV_FETCHES = dict(zip(vllm.KV_FETCH_STAGES, (3.0, 2.0, 1.0), strict=True))
#: counters grow by this fraction of the captured totals per second (~80 finished requests/s per pod)
GROWTH = 0.02
#: histograms whose observations the slow model shifts one bucket up
SHIFTED = {
    h.family[0]
    for h in (vllm_engine.TTFT, vllm_engine.TPOT, vllm_engine.ITL, vllm_engine.E2E, vllm_engine.QUEUE_TIME)
}
SAMPLE = re.compile(r"^(?P<name>[^{\s]+)(?P<labels>\{.*\})?\s+(?P<value>\S+)$")
ADAPTER_NAMESPACE, ADAPTER_POD = "vllm-autoscale", "vllm-autoscale-adapter-6b9d7-x2k4p"


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    model: str
    slow: bool = False
    engines: int = 1
    #: prefill or decode for a disaggregated model's pod (its `llm_d_ai_role`); "" for an aggregated one
    role: str = ""

    @property
    def target_labels(self) -> dict[str, str]:
        """The labels Prometheus attaches to the pod's series, as the chart's PodMonitor relabels them."""
        labels = {"namespace": self.namespace, "pod": self.name, "container": "vllm"}
        return labels | ({ROLE_LABEL: self.role} if self.role else {})


PODS = (
    Pod("llm", "vllm-1b-0", FAST_MODEL),
    Pod("llm", "vllm-1b-1", FAST_MODEL),
    Pod("team-b", "vllm-8b-0", SLOW_MODEL, slow=True, engines=2),
    Pod("llm", f"{PD_NAME}-{PREFILL}-0", PD_MODEL, role=PREFILL),
    Pod("llm", f"{PD_NAME}-{DECODE}-0", PD_MODEL, role=DECODE),
    Pod("llm", f"{PD_NAME}-{DECODE}-1", PD_MODEL, role=DECODE),
)


# --- vLLM pages derived from the real capture ---------------------------------------------------


@dataclass
class Sample:
    name: str
    labels: str
    value: float
    kind: str  # "grow" (counters, histograms), "load" (running/waiting) or "const"


def _shift_up(samples: list[Sample]) -> None:
    """Move every observation of one histogram series one bucket up (the +Inf total unchanged)."""
    finite = [s for s in samples if 'le="+Inf"' not in s.labels]
    for lower, upper in reversed(list(itertools.pairwise(finite))):
        upper.value = lower.value
    finite[0].value = 0.0


def _as_decode(out: list[str | Sample], model: str) -> None:
    """A decode engine's page: most prompt tokens arrive through the KV connector (the capture, an
    aggregated engine, computed them all), and as a KV-transfer consumer it exports its fetches by stage."""
    by_source = {
        re.sub(r'.*source="([^"]*)".*', r"\1", s.labels): s
        for s in out
        if isinstance(s, Sample) and s.name == vllm.PROMPT_TOKENS_BY_SOURCE[0]
    }
    local, external = by_source[LOCAL_COMPUTE], by_source[EXTERNAL_KV_TRANSFER]
    external.value = local.value * (1 - RECOMPUTED_SHARE)
    local.value *= RECOMPUTED_SHARE
    name = vllm.KV_FETCH_BY_STAGE[0]
    out.append(f"# HELP {name} Number of requests fetching KV from a remote engine, by stage.")
    out.append(f"# TYPE {name} gauge")
    for stage, value in KV_FETCHES.items():
        out.append(Sample(name, f'{{engine="0",model_name="{model}",stage="{stage}"}}', value, "const"))


def parse_capture(model: str, slow: bool, engines: int, role: str = "") -> list[str | Sample]:
    """The captured page as comment lines and samples, renamed, shifted and per engine as asked."""
    out: list[str | Sample] = []
    family_type = ""
    buckets: dict[str, list[Sample]] = {}
    for line in FIXTURE.read_text().splitlines():
        if line.startswith("#"):
            if line.startswith("# TYPE"):
                family_type = line.split()[3]
            out.append(line)
            continue
        match = SAMPLE.match(line)
        if not match:
            continue
        name, labels, value = match["name"], match["labels"] or "", float(match["value"])
        labels = labels.replace(f'model_name="{FAST_MODEL}"', f'model_name="{model}"')
        counter = family_type == "counter" and name.endswith("_total")
        histogram = family_type in ("histogram", "summary") and name.endswith(("_bucket", "_sum", "_count"))
        if counter or histogram:
            kind = "grow"
        elif name in (vllm.NUM_REQUESTS_RUNNING[0], vllm.NUM_REQUESTS_WAITING[0]):
            kind = "load"
        else:
            kind = "const"
        copies = [labels] + [
            labels.replace('engine="0"', f'engine="{e}"') for e in range(1, engines) if 'engine="0"' in labels
        ]
        for copy in copies:
            sample = Sample(name, copy, value, kind)
            out.append(sample)
            family = name.removesuffix("_bucket")
            if slow and name.endswith("_bucket") and family in SHIFTED:
                buckets.setdefault(family + re.sub(r',?le="[^"]*"', "", copy), []).append(sample)
            if slow and name.endswith("_sum") and name.removesuffix("_sum") in SHIFTED:
                sample.value *= 2.5  # observations one bucket up are roughly 2.5x larger
    for series in buckets.values():
        _shift_up(series)
    out.append(
        "# HELP vllm:admission_rejections_total Number of "
        "admission attempts rejected by a queue limit, by reason."
    )
    out.append("# TYPE vllm:admission_rejections_total counter")
    for reason in ("max_num_queued_reqs", "max_num_queued_tokens"):
        out.append(
            Sample(
                "vllm:admission_rejections_total", f'{{model_name="{model}",reason="{reason}"}}', 50.0, "grow"
            )
        )
    if role == DECODE:
        _as_decode(out, model)
    return out


def vllm_page(pod: Pod) -> Callable[[], str]:
    lines = parse_capture(pod.model, pod.slow, pod.engines, pod.role)
    started = time.monotonic()

    def render() -> str:
        elapsed = time.monotonic() - started
        load = 0.6 + 0.2 * (int(elapsed) % 4)
        text = []
        for line in lines:
            if isinstance(line, str):
                text.append(line)
                continue
            factor = {"grow": 1 + GROWTH * elapsed, "load": load, "const": 1.0}[line.kind]
            text.append(f"{line.name}{line.labels} {line.value * factor!r}")
        return "\n".join(text) + "\n"

    return render


# --- Fixture exporters --------------------------------------------------------------------------


def exposition(families: dict[str, list[tuple[dict[str, str], float]]]) -> str:
    lines = []
    for name, samples in families.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            rendered = ",".join(f'{k}="{v}"' for k, v in labels.items())
            lines.append(f"{name}{{{rendered}}} {value!r}")
    return "\n".join(lines) + "\n"


HPAS = (("llm", "vllm-1b"), ("team-b", "vllm-8b"))
#: HPAs made by KEDA for a ScaledObject (their metric names carry KEDA's `s<N>-` prefix)
KEDA_HPAS = ("vllm-8b",)
#: (namespace, pod, phase, GPUs requested)
KSM_PODS = (
    ("llm", "vllm-1b-0", "Running", 1),
    ("llm", "vllm-1b-1", "Running", 1),
    ("llm", "vllm-1b-2", "Pending", 1),
    ("llm", "batch-cpu-0", "Pending", 0),
    ("team-b", "vllm-8b-0", "Running", 2),
    *((pod.namespace, pod.name, "Running", 1) for pod in PODS if pod.role),
)
#: the disaggregated model's Deployments, one per role, with their ready replicas (its pods above)
PD_DEPLOYMENTS = tuple(
    (namespace, f"{PD_NAME}-{role}", float(sum(p.role == role for p in PODS)))
    for namespace, role in (("llm", PREFILL), ("llm", DECODE))
)
TARGET_VALUES = {"requests": ("average", 24.0), "ratio": ("value", 0.8), "seconds": ("value", 0.5)}


def ksm_page(started: float) -> str:
    desired = 2 + int((time.monotonic() - started) / 2) % 2
    families: dict[str, list[tuple[dict[str, str], float]]] = {
        name: []
        for name in (
            exporters.HPA_INFO,
            exporters.HPA_TARGET,
            exporters.HPA_DESIRED,
            exporters.HPA_CURRENT,
            exporters.HPA_MIN,
            exporters.HPA_MAX,
            exporters.DEPLOYMENT_READY,
            exporters.POD_PHASE,
            exporters.POD_REQUESTS,
        )
    }
    for namespace, hpa in HPAS:
        ref = {"namespace": namespace, "horizontalpodautoscaler": hpa}
        families[exporters.HPA_INFO].append(
            (
                {
                    **ref,
                    "scaletargetref_api_version": "apps/v1",
                    "scaletargetref_kind": "Deployment",
                    "scaletargetref_name": hpa,
                },
                1.0,
            )
        )
        # The second HPA is KEDA's: it names each trigger's metric `s<trigger index>-<metric>`.
        keda = hpa in KEDA_HPAS

        def prefix(index: int, keda: bool = keda) -> str:
            return f"s{index}-" if keda else ""

        for index, metric in enumerate(BUILTIN):
            target_type, value = TARGET_VALUES[metric.unit]
            families[exporters.HPA_TARGET].append(
                (
                    {**ref, "metric_name": prefix(index) + metric.name, "metric_target_type": target_type},
                    value,
                )
            )
        # vllm_saturation once configured, with the Value target of 1 it is made for
        families[exporters.HPA_TARGET].append(
            ({**ref, "metric_name": prefix(len(BUILTIN)) + SATURATION, "metric_target_type": "value"}, 1.0)
        )
        # vllm_request_rate_forecast once a horizon is configured, per replica at a knee of 40 req/s
        families[exporters.HPA_TARGET].append(
            (
                {**ref, "metric_name": prefix(len(BUILTIN) + 1) + FORECAST, "metric_target_type": "average"},
                36.0,
            )
        )
        families[exporters.HPA_DESIRED].append((ref, float(desired)))
        families[exporters.HPA_CURRENT].append((ref, 2.0))
        families[exporters.HPA_MIN].append((ref, 1.0))
        families[exporters.HPA_MAX].append((ref, 8.0))
        families[exporters.DEPLOYMENT_READY].append(({"namespace": namespace, "deployment": hpa}, 2.0))
    for namespace, deployment, ready in PD_DEPLOYMENTS:
        families[exporters.DEPLOYMENT_READY].append(
            ({"namespace": namespace, "deployment": deployment}, ready)
        )
    for namespace, pod, phase, gpus in KSM_PODS:
        ids = {"namespace": namespace, "pod": pod, "uid": f"uid-{pod}"}
        for candidate in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            families[exporters.POD_PHASE].append(({**ids, "phase": candidate}, float(candidate == phase)))
        container = {**ids, "container": "main", "node": "gpu-node-a"}
        families[exporters.POD_REQUESTS].append(({**container, "resource": "cpu", "unit": "core"}, 4.0))
        if gpus:
            families[exporters.POD_REQUESTS].append(
                ({**container, "resource": exporters.GPU_RESOURCE, "unit": "integer"}, float(gpus))
            )
    return exposition(families)


#: (host, gpu, namespace, pod, clock-event bitmask, exposed under the pre-DCGM-3.3 name)
GPUS = (
    ("gpu-node-a", "0", "llm", "vllm-1b-0", 0x4 | 0x40, False),
    ("gpu-node-a", "1", "llm", "vllm-1b-1", 0x8, True),
    ("gpu-node-b", "0", "team-b", "vllm-8b-0", 0x1, False),
    ("gpu-node-b", "1", "team-b", "vllm-8b-0", 0x0, False),
    ("gpu-node-b", "2", "", "", 0x0, False),  # unallocated: the exporter maps it to no pod
    ("gpu-node-b", "3", "llm", "trainer-0", 0x4, False),  # not a vLLM pod
)


def dcgm_page() -> str:
    families: dict[str, list[tuple[dict[str, str], float]]] = {}
    for host, gpu, namespace, pod, reasons, old_name in GPUS:
        labels = {
            "gpu": gpu,
            "UUID": f"GPU-{host}-{gpu}",
            "device": f"nvidia{gpu}",
            "modelName": "NVIDIA H200",
            "Hostname": host,
        }
        if pod:
            labels |= {"namespace": namespace, "pod": pod, "container": "main"}
        fields = {
            exporters.GPU_UTIL[0]: 96.0,
            exporters.FB_USED[0]: 130_000.0,
            exporters.FB_FREE[0]: 10_000.0,
            exporters.GPU_TEMP[0]: 71.0,
            exporters.POWER[0]: 612.5,
            exporters.XID[0]: 0.0,
            exporters.THROTTLE_REASONS[1 if old_name else 0]: float(reasons),
        }
        for name, value in fields.items():
            families.setdefault(name, []).append((labels, value))
    return exposition(families)


def sqs_page() -> str:
    return exposition(
        {
            exporters.SQS_VISIBLE: [
                ({"queue_name": "inference-requests"}, 340.0),
                ({"queue_name": "inference-requests-dlq"}, 12.0),
            ]
        }
    )


def adapter_page(telemetry: Telemetry) -> Callable[[], str]:
    """The adapter's real registry, advanced as if it had served a round of HPA requests per scrape."""

    telemetry.held_sample_age.source = lambda: [(metric.name, 12.0) for metric in BUILTIN]

    def render() -> str:
        for metric in BUILTIN:
            telemetry.requests.labels(metric.name, "200").inc(4)
            telemetry.requests.labels(metric.name, "503").inc()
            telemetry.request_seconds.labels(metric.name).observe(0.0008)
            telemetry.errors.labels(metric.name, "stale").inc()
            telemetry.sample_age.labels(metric.name).observe(12.0)
        telemetry.observe_upstream("prometheus", "success", 0.02)
        telemetry.observe_upstream("prometheus", "timeout", 5.0)
        telemetry.grpc_calls.labels("GetMetrics", "OK").inc(4)
        telemetry.grpc_calls.labels("IsActive", "UNAVAILABLE").inc()
        telemetry.grpc_seconds.labels("GetMetrics").observe(0.0009)
        telemetry.cache_hits.inc(20)
        telemetry.cache_misses.inc()
        telemetry.cache_keys.set(len(BUILTIN))
        telemetry.ready.set(1)
        return generate_latest(telemetry.registry).decode()

    return render
