"""GPU health of the vLLM pods, from the NVIDIA DCGM exporter.

The exporter must map GPUs to pods (its Kubernetes mode) and be scraped with honor_labels, so that
`namespace` and `pod` name the GPU's workload rather than the exporter; GPUs are then matched to
the selected vLLM pods and labelled with their model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapter.vocabulary import exporters
from adapter.vocabulary.vllm import Family
from dashboards import layout
from dashboards import panels as p
from dashboards.layout import Row
from dashboards.queries import dcgm
from dashboards.queries import vllm_engine as v
from dashboards.queries.grafana import BY_POD

_SETUP = (
    " Needs dcgm-exporter with Kubernetes pod mapping, scraped with honor_labels (kube-prometheus-stack's "
    "ServiceMonitor does), so namespace/pod name the GPU's workload."
)


def _field(
    title: str,
    family: Family,
    description: str,
    unit: str,
    steps: p.Thresholds = p.NO_THRESHOLD,
    *,
    width: int,
    maximum: int | None = None,
    links: Sequence[dict[str, Any]] = (),
) -> p.Placed:
    """A DCGM field per vLLM GPU; `{field}` in the description names the field as the exporter does."""
    return p.timeseries(
        title,
        description.format(field=family[0]),
        [dcgm.field(family)],
        unit,
        steps,
        maximum=maximum,
        links=links,
        width=width,
    )


def utilisation() -> Row:
    running = p.timeseries(
        "Running requests per pod",
        "Requests in execution batches per pod, to read next to the GPU lines.",
        [v.running(BY_POD)],
        p.COUNT,
        width=12,
    )
    return Row(
        "Utilisation",
        [
            _field(
                "GPU utilisation",
                exporters.GPU_UTIL,
                "Percent of time a kernel ran ({field}, 0-100). Not a scaling signal: a saturated and a "
                "half-idle vLLM server both read 95-100%." + _SETUP,
                p.PERCENT,
                maximum=100,
                width=12,
            ),
            running,
        ],
    )


def memory() -> Row:
    used_share = p.timeseries(
        "Framebuffer used share",
        "Used / (used + free). Above the configured --gpu-memory-utilization, something besides vLLM uses "
        "this GPU, or CUDA graphs and activations outgrew their reserve.",
        [dcgm.fb_used_ratio()],
        p.RATIO,
        p.thresholds((0.97, "orange"), (0.99, "red")),
        maximum=1,
        width=8,
    )
    return Row(
        "Memory",
        [
            _field(
                "Framebuffer used",
                exporters.FB_USED,
                "GPU memory in use ({field}, MiB). vLLM reserves --gpu-memory-utilization of it at start for "
                "weights and the KV cache, so a flat high line is normal.",
                p.MEBIBYTES,
                width=8,
            ),
            _field(
                "Framebuffer free",
                exporters.FB_FREE,
                "GPU memory free ({field}, MiB).",
                p.MEBIBYTES,
                p.thresholds((1024, "green"), base="red"),
                width=8,
            ),
            used_share,
        ],
    )


def thermals_and_power() -> Row:
    old, new = exporters.THROTTLE_REASONS[1], exporters.THROTTLE_REASONS[0]
    throttled = p.timeseries(
        "Throttled GPUs by reason",
        f"GPUs whose clocks are held down, per NVML reason bit of {old} (renamed {new} in DCGM 3.3). Not in "
        "dcgm-exporter's default counters: add the field to its counters CSV." + _SETUP,
        [dcgm.throttled_gpus(bit, reason) for bit, reason in exporters.THROTTLE_BITS],
        p.COUNT,
        p.thresholds((1, "orange")),
        links=[p.runbook()],
        width=8,
    )
    return Row(
        "Thermals and power",
        [
            _field(
                "Temperature",
                exporters.GPU_TEMP,
                "GPU temperature ({field}). Data-centre GPUs begin slowing down in the high 80s °C.",
                p.CELSIUS,
                p.thresholds((80, "orange"), (87, "red")),
                width=8,
            ),
            _field("Power draw", exporters.POWER, "Board power ({field}, W).", p.WATTS, width=8),
            throttled,
        ],
    )


def errors() -> Row:
    xid = _field(
        "Last XID error",
        exporters.XID,
        "Code of the last XID error per GPU ({field}; 0 = none). 79 (fallen off the bus), 48 and 63/64 (ECC) "
        "and 74 (NVLink) need the node drained; 13, 31 and 43 usually come from the application. Look the "
        "code up in NVIDIA's XID catalogue.",
        p.CODE,
        p.thresholds((1, "red")),
        links=[p.runbook()],
        width=24,
    )
    return Row("Errors", [xid])


def build() -> p.Dashboard:
    """The GPU dashboard."""
    return layout.build(
        layout.GPU,
        "GPU utilisation, memory, temperature, power, clock throttling and XID errors of the vLLM pods (DCGM "
        "exporter).",
        "gpu",
        layout.serving_variables(),
        [utilisation(), memory(), thermals_and_power(), errors()],
    )


dashboard = build()
