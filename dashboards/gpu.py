"""GPU health of the vLLM pods, from the NVIDIA DCGM exporter.

The exporter must map GPUs to pods (its Kubernetes mode) and be scraped with honor_labels, so that
`namespace` and `pod` name the GPU's workload rather than the exporter; GPUs are then matched to
the selected vLLM pods and labelled with their model.
"""

from __future__ import annotations

from dashboards import panels as p
from dashboards import queries as q

_SETUP = (
    " Needs dcgm-exporter with Kubernetes pod mapping, scraped with honor_labels (kube-prometheus-stack's "
    "ServiceMonitor does), so namespace/pod name the GPU's workload."
)


def build() -> p.Dashboard:
    """The GPU dashboard."""
    grid = p.Grid()
    grid.row("Utilisation")
    grid.add(
        p.timeseries(
            "GPU utilisation",
            "Percent of time a kernel ran (DCGM_FI_DEV_GPU_UTIL, 0-100). Not a scaling signal: a saturated "
            "and a half-idle vLLM server both read 95-100%." + _SETUP,
            [q.dcgm(q.GPU_UTIL)],
            p.PERCENT,
            minimum=0,
            maximum=100,
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Running requests per pod",
            "Requests in execution batches per pod, to read next to the GPU lines.",
            [q.running(q.BY_POD)],
            p.COUNT,
            minimum=0,
        ),
        12,
    )

    grid.row("Memory")
    grid.add(
        p.timeseries(
            "Framebuffer used",
            "GPU memory in use (DCGM_FI_DEV_FB_USED, MiB). vLLM reserves --gpu-memory-utilization of it at start "
            "for weights and the KV cache, so a flat high line is normal.",
            [q.dcgm(q.FB_USED)],
            p.MEBIBYTES,
            minimum=0,
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "Framebuffer free",
            "GPU memory free (DCGM_FI_DEV_FB_FREE, MiB).",
            [q.dcgm(q.FB_FREE)],
            p.MEBIBYTES,
            p.thresholds((1024, "green"), base="red"),
            minimum=0,
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "Framebuffer used share",
            "Used / (used + free). Above the configured --gpu-memory-utilization, something besides vLLM uses "
            "this GPU, or CUDA graphs and activations outgrew their reserve.",
            [q.fb_used_ratio()],
            p.RATIO,
            p.thresholds((0.97, "orange"), (0.99, "red")),
            minimum=0,
            maximum=1,
        ),
        8,
    )

    grid.row("Thermals and power")
    grid.add(
        p.timeseries(
            "Temperature",
            "GPU temperature (DCGM_FI_DEV_GPU_TEMP). Data-centre GPUs begin slowing down in the high 80s °C.",
            [q.dcgm(q.GPU_TEMP)],
            p.CELSIUS,
            p.thresholds((80, "orange"), (87, "red")),
            minimum=0,
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "Power draw",
            "Board power (DCGM_FI_DEV_POWER_USAGE, W).",
            [q.dcgm(q.POWER)],
            p.WATTS,
            minimum=0,
        ),
        8,
    )
    grid.add(
        p.timeseries(
            "Throttled GPUs by reason",
            "GPUs whose clocks are held down, per NVML reason bit of DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (renamed "
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS in DCGM 3.3). Not in dcgm-exporter's default counters: add the "
            "field to its counters CSV." + _SETUP,
            [q.throttled_gpus(bit, reason) for bit, reason in q.THROTTLE_BITS],
            p.COUNT,
            p.thresholds((1, "orange")),
            minimum=0,
            links=[p.runbook()],
        ),
        8,
    )

    grid.row("Errors")
    grid.add(
        p.timeseries(
            "Last XID error",
            "Code of the last XID error per GPU (DCGM_FI_DEV_XID_ERRORS; 0 = none). 79 (fallen off the bus), "
            "48 and 63/64 (ECC) and 74 (NVLink) need the node drained; 13, 31 and 43 usually come from the "
            "application. Look the code up in NVIDIA's XID catalogue.",
            [q.dcgm(q.XID)],
            p.CODE,
            p.thresholds((1, "red")),
            minimum=0,
            links=[p.runbook()],
        ),
        24,
    )
    return p.build(
        p.GPU,
        "GPU utilisation, memory, temperature, power, clock throttling and XID errors of the vLLM pods (DCGM "
        "exporter).",
        "gpu",
        p.serving_variables(),
        grid,
    )


dashboard = build()
