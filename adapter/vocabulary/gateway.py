"""The inference gateway's `/metrics` names this project reads: the endpoint picker (EPP) of the
Gateway API inference extension, now developed as llm-d's router.

Read from llm-d/llm-d-router at commit ebab687 (2026-08-22, after v0.10.0): `docs/metrics.md` and
`pkg/epp/metrics/{metrics.go,llm_d_router_metrics.go}`. The EPP moved there from
kubernetes-sigs/gateway-api-inference-extension (its README, v1.6.0). Current names carry the
`llm_d_epp_` prefix; the older `inference_extension_` / `inference_objective_` names are still
emitted beside them ("dual emission") and are kept here as aliases only where their labels are the
same, so that PromQL `or` keeps one series per label set instead of counting a request twice.

With flow control on, a request waits in the EPP's queue before any vLLM pod counts it: with a
gateway in front, `vllm:num_requests_waiting` stays low while users wait (llm-d-autoscaling#813).

Unlike vLLM's gauges, these series are created by the first event with their labels and removed when
a flow is garbage collected: a missing series is an empty queue, not a broken exporter, so each
family names the series that prove the EPP is there (`TARGETS_*`).
"""

from __future__ import annotations

from typing import Final

from adapter.vocabulary.vllm import Family

#: requests held in flow control; labels fairness_id, priority, inference_pool, model_name,
#: target_model_name (Inc at enqueue, Dec at dispatch or rejection)
FLOW_CONTROL_QUEUE_SIZE: Final[Family] = (
    "llm_d_epp_flow_control_queue_size",
    "inference_extension_flow_control_queue_size",
)
#: the saturation gating dispatch, per inference_pool and stage: recorded on every dispatch cycle
#: while flow control runs, so it proves an EPP with flow control exists for a pool
FLOW_CONTROL_POOL_SATURATION: Final[Family] = (
    "llm_d_epp_flow_control_pool_saturation",
    "inference_extension_flow_control_pool_saturation",
)
#: requests in flight through the gateway; labels model_name, target_model_name, fairness_id,
#: priority. Its deprecated twin `inference_objective_running_requests` has `model_name` only, so it
#: is not an alias: `or` would keep both series and count every request twice.
REQUEST_RUNNING: Final[Family] = ("llm_d_epp_request_running",)
#: mean model-server queue over the pool's endpoints, label `name` (the pool)
POOL_AVERAGE_QUEUE_SIZE: Final[Family] = ("llm_d_epp_average_queue_size", "inference_pool_average_queue_size")
#: ready endpoints of the pool, label `name`
POOL_READY_ENDPOINTS: Final[Family] = ("llm_d_epp_ready_endpoints",)

#: the labels that name a pool: flow control's own, and the pool gauges' `name`
POOL_LABEL: Final = "inference_pool"
POOL_GAUGE_LABEL: Final = "name"
