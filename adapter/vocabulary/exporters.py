"""The series of other exporters the alerts and dashboards read: kube-state-metrics, the NVIDIA DCGM exporter
and the CloudWatch exporter (SQS), each name written once here as `adapter.vocabulary.vllm` writes vLLM's.

The adapter itself never reads them; they describe what the cluster around it exposes.
"""

from __future__ import annotations

from typing import Final

from adapter.vocabulary.vllm import Family

# --- kube-state-metrics ---------------------------------------------------------------------------

HPA_INFO: Final = "kube_horizontalpodautoscaler_info"
HPA_TARGET: Final = "kube_horizontalpodautoscaler_spec_target_metric"
HPA_DESIRED: Final = "kube_horizontalpodautoscaler_status_desired_replicas"
HPA_CURRENT: Final = "kube_horizontalpodautoscaler_status_current_replicas"
HPA_MIN: Final = "kube_horizontalpodautoscaler_spec_min_replicas"
HPA_MAX: Final = "kube_horizontalpodautoscaler_spec_max_replicas"
HPA_CONDITION: Final = "kube_horizontalpodautoscaler_status_condition"
#: the label naming the HPA on every `kube_horizontalpodautoscaler_*` series
HPA_LABEL: Final = "horizontalpodautoscaler"
DEPLOYMENT_READY: Final = "kube_deployment_status_replicas_ready"
POD_PHASE: Final = "kube_pod_status_phase"
POD_REQUESTS: Final = "kube_pod_container_resource_requests"
#: kube-state-metrics sanitises the resource name `nvidia.com/gpu` into a label value
GPU_RESOURCE: Final = "nvidia_com_gpu"

# --- DCGM exporter fields (default counters, except the throttle reasons, which must be enabled) -----

GPU_UTIL: Final[Family] = ("DCGM_FI_DEV_GPU_UTIL",)
FB_USED: Final[Family] = ("DCGM_FI_DEV_FB_USED",)
FB_FREE: Final[Family] = ("DCGM_FI_DEV_FB_FREE",)
GPU_TEMP: Final[Family] = ("DCGM_FI_DEV_GPU_TEMP",)
POWER: Final[Family] = ("DCGM_FI_DEV_POWER_USAGE",)
XID: Final[Family] = ("DCGM_FI_DEV_XID_ERRORS",)
# DCGM 3.3 renamed the field (same NVML bitmask); older exporters still expose the old name.
THROTTLE_REASONS: Final[Family] = (
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
)
#: NVML clock-event reason bits that cost throughput (idle, app-clock and sync-boost bits do not)
THROTTLE_BITS: Final = (
    (0x4, "SW power cap"),
    (0x8, "HW slowdown"),
    (0x20, "SW thermal"),
    (0x40, "HW thermal"),
    (0x80, "HW power brake"),
)

# --- CloudWatch exporter ------------------------------------------------------------------------------

#: visible messages of an SQS queue (label `queue_name`), the queue alerts' default depth
SQS_VISIBLE: Final = "aws_sqs_approximate_number_of_messages_visible_average"
