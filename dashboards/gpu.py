"""GPU health of the vLLM pods, from the NVIDIA DCGM exporter.

The exporter must map GPUs to pods (its Kubernetes mode) and be scraped with honor_labels, so that
`namespace` and `pod` name the GPU's workload rather than the exporter; GPUs are then matched to
the selected vLLM pods and labelled with their model.
"""

from __future__ import annotations

from adapter import exporters
from dashboards import layout
from dashboards import panels as p
from dashboards.layout import Placed, Row
from dashboards.queries import dcgm
from dashboards.queries import vllm_engine as v
from dashboards.queries.grafana import BY_POD

_SETUP = (
    " Needs dcgm-exporter with Kubernetes pod mapping, scraped with honor_labels (kube-prometheus-stack's "
    "ServiceMonitor does), so namespace/pod name the GPU's workload."
)


def utilisation() -> Row:
    return Row(
        "Utilisation",
        [
            Placed(
                p.timeseries(
                    "GPU utilisation",
                    f"Percent of time a kernel ran ({exporters.GPU_UTIL[0]}, 0-100). Not a scaling signal: a "
                    "saturated and a half-idle vLLM server both read 95-100%." + _SETUP,
                    [dcgm.field(exporters.GPU_UTIL)],
                    p.PERCENT,
                    minimum=0,
                    maximum=100,
                ),
                12,
            ),
            Placed(
                p.timeseries(
                    "Running requests per pod",
                    "Requests in execution batches per pod, to read next to the GPU lines.",
                    [v.running(BY_POD)],
                    p.COUNT,
                    minimum=0,
                ),
                12,
            ),
        ],
    )


def memory() -> Row:
    return Row(
        "Memory",
        [
            Placed(
                p.timeseries(
                    "Framebuffer used",
                    f"GPU memory in use ({exporters.FB_USED[0]}, MiB). vLLM reserves --gpu-memory-utilization of it "
                    "at start for weights and the KV cache, so a flat high line is normal.",
                    [dcgm.field(exporters.FB_USED)],
                    p.MEBIBYTES,
                    minimum=0,
                ),
                8,
            ),
            Placed(
                p.timeseries(
                    "Framebuffer free",
                    f"GPU memory free ({exporters.FB_FREE[0]}, MiB).",
                    [dcgm.field(exporters.FB_FREE)],
                    p.MEBIBYTES,
                    p.thresholds((1024, "green"), base="red"),
                    minimum=0,
                ),
                8,
            ),
            Placed(
                p.timeseries(
                    "Framebuffer used share",
                    "Used / (used + free). Above the configured --gpu-memory-utilization, something besides vLLM "
                    "uses this GPU, or CUDA graphs and activations outgrew their reserve.",
                    [dcgm.fb_used_ratio()],
                    p.RATIO,
                    p.thresholds((0.97, "orange"), (0.99, "red")),
                    minimum=0,
                    maximum=1,
                ),
                8,
            ),
        ],
    )


def thermals_and_power() -> Row:
    return Row(
        "Thermals and power",
        [
            Placed(
                p.timeseries(
                    "Temperature",
                    f"GPU temperature ({exporters.GPU_TEMP[0]}). Data-centre GPUs begin slowing down in the high "
                    "80s °C.",
                    [dcgm.field(exporters.GPU_TEMP)],
                    p.CELSIUS,
                    p.thresholds((80, "orange"), (87, "red")),
                    minimum=0,
                ),
                8,
            ),
            Placed(
                p.timeseries(
                    "Power draw",
                    f"Board power ({exporters.POWER[0]}, W).",
                    [dcgm.field(exporters.POWER)],
                    p.WATTS,
                    minimum=0,
                ),
                8,
            ),
            Placed(
                p.timeseries(
                    "Throttled GPUs by reason",
                    "GPUs whose clocks are held down, per NVML reason bit of "
                    f"{exporters.THROTTLE_REASONS[1]} (renamed {exporters.THROTTLE_REASONS[0]} in DCGM 3.3). Not in dcgm-exporter's default "
                    "counters: add the field to its counters CSV." + _SETUP,
                    [dcgm.throttled_gpus(bit, reason) for bit, reason in exporters.THROTTLE_BITS],
                    p.COUNT,
                    p.thresholds((1, "orange")),
                    minimum=0,
                    links=[p.runbook()],
                ),
                8,
            ),
        ],
    )


def errors() -> Row:
    return Row(
        "Errors",
        [
            Placed(
                p.timeseries(
                    "Last XID error",
                    f"Code of the last XID error per GPU ({exporters.XID[0]}; 0 = none). 79 (fallen off the "
                    "bus), 48 and 63/64 (ECC) and 74 (NVLink) need the node drained; 13, 31 and 43 usually come "
                    "from the application. Look the code up in NVIDIA's XID catalogue.",
                    [dcgm.field(exporters.XID)],
                    p.CODE,
                    p.thresholds((1, "red")),
                    minimum=0,
                    links=[p.runbook()],
                ),
                24,
            ),
        ],
    )


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
