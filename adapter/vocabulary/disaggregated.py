"""The metrics of disaggregated (P/D) serving: a prefill pool and a decode pool of one model.

The decode pool scales on the metrics every fleet has (`vllm_kv_cache_usage`, `vllm_requests_running`,
`vllm_tpot_seconds`) read with the role in the HPA's selector (`llm-d.ai/role=decode`). What the
prefill pool needs has no vLLM gauge: the prompt tokens its pods hold, in seconds of its measured
prefill throughput, which is what a time-to-first-token objective bounds (`PrefillBacklogSpec`).
`vllm_kv_fetch_requests` counts the hand-overs on the decode pool, which only a KV consumer reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from adapter.vocabulary import vllm
from adapter.vocabulary.catalogue import (
    DEFAULT_WINDOW_SECONDS,
    WAITING_FOR_CAPACITY,
    Aggregation,
    GaugeSpec,
    HistogramSpec,
    MetricDef,
    Statistic,
)
from adapter.vocabulary.roles import DECODE, PREFILL, Role

#: the prefill pool's signal; it exists once `metrics.vllm_prefill_backlog_seconds.prefill_throughput` is set
PREFILL_BACKLOG: Final = "vllm_prefill_backlog_seconds"
#: the decode pool's hand-overs; served always, answered only where the decode pods report them
KV_FETCH: Final = "vllm_kv_fetch_requests"


@dataclass(frozen=True)
class PrefillBacklogSpec(GaugeSpec):
    """Seconds of prefill work the pool holds: `(Σ running + Σ waiting) × prompt / (throughput × pods)`.

    vLLM exports no count of the prompt tokens waiting or in prefill, so they are derived: the
    requests the pods hold (`vllm:num_requests_running` plus the capacity part of
    `vllm:num_requests_waiting`: on a prefill engine every running request is in prefill) times the mean
    prompt tokens a request computed over `prompt.window_seconds` (Δsum / Δcount of
    `vllm:request_prefill_kv_computed_tokens`, which leaves out prefix-cache hits), summed over the
    pool, divided by `throughput` (prompt tokens per second one pod computes, measured by
    `vllm-autoscale profile` through the P/D path) times the pods. With a `Value` target the HPA's
    `ceil(pods × value / target)` is the pool that drains its backlog within the target.

    A pool holding nothing reads 0 whatever the window; one holding requests while no request
    finished in the window has an unknown prompt size and no value (503), never a guess. It is a
    `GaugeSpec` over the two gauges, so an absent or NaN gauge on a pod is a gap (503).
    """

    throughput: float = field(default=1.0, kw_only=True)
    """Prompt tokens per second one pod of the pool computes (measured; required in configuration)."""
    prompt: HistogramSpec = field(
        default=HistogramSpec(vllm.PREFILL_COMPUTED_TOKENS, Statistic.MEAN, DEFAULT_WINDOW_SECONDS, 0.5, ()),
        kw_only=True,
    )
    """The mean prompt tokens computed per request, over its window."""

    @classmethod
    def of(cls, throughput: float, window: float = DEFAULT_WINDOW_SECONDS) -> PrefillBacklogSpec:
        prompt = HistogramSpec(vllm.PREFILL_COMPUTED_TOKENS, Statistic.MEAN, window, 0.5, ())
        return cls(
            (vllm.NUM_REQUESTS_RUNNING, WAITING_FOR_CAPACITY),
            Aggregation.SUM,
            throughput=throughput,
            prompt=prompt,
        )

    @property
    def queued(self) -> GaugeSpec:
        """The requests the pool holds (running + waiting for capacity), as a plain gauge."""
        return GaugeSpec(self.families, Aggregation.SUM, smoothing_seconds=self.smoothing_seconds)


def prefill_backlog(
    throughput: float,
    window: float = DEFAULT_WINDOW_SECONDS,
    *,
    role: Role | None = None,
    name: str = PREFILL_BACKLOG,
) -> MetricDef:
    """The prefill pool's backlog in seconds (`PrefillBacklogSpec`). Not built in: a throughput is a
    property of one model on one GPU through one KV connector, never a default."""
    return MetricDef(
        name=name,
        help=f"Seconds of prefill the {PREFILL} pool holds: prompt tokens waiting and in prefill over "
        f"{throughput:g} tokens/s per pod (Value: the TTFT budget for queueing).",
        unit="seconds",
        spec=PrefillBacklogSpec.of(throughput, window),
        on_empty=None,
        role=role or Role(PREFILL),
    )


#: metrics of P/D fleets served beside the built-ins; each reads its own pool
DISAGGREGATED: Final[tuple[MetricDef, ...]] = (
    MetricDef(
        name=KV_FETCH,
        help="Requests the decode pool is handing over from prefill pods (KV fetch waiting, in progress "
        "or fetched and waiting to run), summed.",
        unit="requests",
        spec=GaugeSpec((vllm.KV_FETCH_BY_STAGE,), Aggregation.SUM),
        role=Role(DECODE),
    ),
)
