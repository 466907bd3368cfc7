"""The NVIDIA DCGM exporter, scraped with honor_labels so that `namespace`/`pod` name the GPU's workload.

Field names come from `adapter.vocabulary.exporters`. GPUs are kept only where they belong to a selected vLLM
pod, and are labelled with its model.
"""

from __future__ import annotations

from typing import Final

from adapter.vocabulary import vllm
from adapter.vocabulary.exporters import FB_FREE, FB_USED, THROTTLE_REASONS
from adapter.vocabulary.promql.expressions import aggregate, series
from dashboards.queries.grafana import NAMESPACE, POD, M, Query, query
from dashboards.queries.vllm_engine import model_of_pods

GPU_LABELS: Final = ("namespace", "pod", "gpu")
GPU_LEGEND: Final = "{{pod}} GPU {{gpu}}"


def _per_gpu(family: vllm.Family) -> str:
    """A DCGM field per GPU of the selected namespaces and pods."""
    return aggregate("max", GPU_LABELS, series(family, (NAMESPACE, POD)))


def _with_model(per_gpu: str) -> str:
    """Keep the GPUs of selected vLLM pods and label them with the pod's model (`group` is 1)."""
    return f"{per_gpu} * on (namespace, pod) group_left ({M}) {model_of_pods()}"


def field(family: vllm.Family) -> Query:
    """A DCGM field (an `adapter.vocabulary.exporters` family) per vLLM GPU."""
    return query(_with_model(_per_gpu(family)), GPU_LEGEND)


def fb_used_ratio() -> Query:
    used, free = _per_gpu(FB_USED), _per_gpu(FB_FREE)
    return query(_with_model(f"({used} / ({used} + {free}))"), GPU_LEGEND)


def throttled_gpus(bit: int, reason: str) -> Query:
    """GPUs whose clock-event bitmask has `bit` set: floor(x / bit) is odd exactly then."""
    return query(f"sum(floor(({_with_model(_per_gpu(THROTTLE_REASONS))}) / {bit}) % 2)", reason)
