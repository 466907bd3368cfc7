"""No overshoot while capacity loads: in-flight requests, capped at what the arriving requests need.

The HPA's in-flight proposal is ceil(in-flight / target). While replicas load, the Ready ones build a
backlog, in-flight grows with it, and every sync asks for more replicas for work that the replicas
already asked for will absorb; just after they turn Ready the backlog is still counted (each request
waits at the replica it was sent to), and the HPA asks again. Replicas asked for then arrive a cold
start later, when the backlog is gone, and stay for the scale-down window. A level cannot tell a
backlog from more load; the arrival rate can: it does not grow while the fleet is short.

`inflight_within_demand` is `vllm_requests_inflight` capped at `target x (arrival rate / per-replica
rate + headroom)`, so the HPA's proposal is the smaller of its in-flight proposal and the replicas the
arrivals need plus `headroom` (half a replica by default, so noise in the rate cannot add a whole
one). In-flight still decides while it is below that cap: in a ramp it reacts to queueing before the
arrival rate alone would, which is what keeps the SLO. The per-replica rate is a replica's throughput
at its target utilisation (from `vllm-autoscale profile`, or the demo's measured capacity x 0.75).
The PromQL needs Prometheus and an arrival counter (`lab.demo.cluster.gateway`); in the demo the adapter
evaluates it with `lab.demo.cluster.pages`.

`steady_need` is what the overshoot is measured against: the fewest replicas that serve a rate within
the SLO in steady state (no replica loading, no backlog).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from adapter.vocabulary.promql.expressions import duration, number
from lab.demo.cluster.gateway import UPSTREAM_REQUESTS
from lab.demo.loadgen import Scenario, Stage, arrivals
from lab.emulator import Engine, EngineParams, Request
from lab.simulated_serving import serve, tpot
from lab.slo import Slo

METRIC: Final = "inflight_within_demand"


@dataclass(frozen=True)
class DemandCap:
    """The cap's parameters (rates in requests per emulated second, durations in emulated seconds)."""

    per_replica_rate: float
    """Requests/s one replica serves at its target utilisation."""
    headroom: float = 0.5
    """Replicas allowed beyond what the arrival rate needs."""
    window: float = 30.0
    """The arrival rate's window, emulated seconds. Poisson noise of a rate over `window` at rate r is
    1/sqrt(r x window) (8 % for 5 req/s over 30 s), and the scale-down window keeps the highest of ~20
    syncs' proposals (about +2 noise's worth): half a replica of headroom absorbs that at a handful of
    replicas; a longer window would lag a spike's onset."""

    def query(self, target: float, cluster: str, time_scale: float = 1.0) -> str:
        """The metric's PromQL for an in-flight `target` per replica. The adapter's clock is the wall
        clock and the demo's runs `time_scale` times faster: the window is divided by it and the
        per-replica rate multiplied (a cluster's query has `time_scale` 1)."""
        inflight = (
            "sum(vllm:num_requests_running{<<.LabelMatchers>>}) + "
            "sum(vllm:num_requests_waiting{<<.LabelMatchers>>})"
        )
        window = duration(self.window / time_scale)
        arrivals = f'sum(rate({UPSTREAM_REQUESTS}{{envoy_cluster_name="{cluster}"}}[{window}]))'
        rate = number(round(self.per_replica_rate * time_scale, 6))
        cap = f"{number(target)} * ({arrivals} / {rate} + {number(self.headroom)})"
        return f"clamp_max({inflight}, scalar({cap}))"

    def metric(self, target: float, cluster: str, time_scale: float = 1.0) -> dict[str, object]:
        """The `metrics:` entry of the adapter's configuration."""
        return {
            "query": self.query(target, cluster, time_scale),
            # The gateway and the fleet are one cluster-wide pair here; a cluster scopes both by labels.
            "namespaced": False,
            # No arrival rate yet (one scrape, or the gateway down) is a 503: the HPA holds.
            "on_empty": "error",
            "help": "In-flight requests, capped at what the arrival rate needs plus headroom.",
            "unit": "requests",
        }


def steady_attainment(
    params: EngineParams, replicas: int, rate: float, slo: Slo, *, seed: int = 0, duration: float = 600.0
) -> float:
    """SLO attainment of `replicas` engines fed `rate` requests/s round-robin (as the Service spreads
    them), in simulated time without a clock (`lab.simulated_serving.serve`, drained to idle), over
    requests sent after the first sixth (the warm-up)."""
    engines = [Engine(params, seed=seed + i) for i in range(replicas)]
    steady = Scenario("steady", (Stage("steady", duration, 1.0),), "")
    stream = ((a.at, a.prompt_tokens, a.max_tokens) for a in arrivals(steady, rate, seed=seed))
    measured = [r for r in serve(engines, stream) if r.arrival >= duration / 6]
    good = sum(1 for r in measured if _meets(r, slo))
    return good / len(measured) if measured else 1.0


def _meets(request: Request, slo: Slo) -> bool:
    ttft = request.ttft
    if ttft is None or ttft > slo.ttft:
        return False
    mean = tpot(request)
    return mean is None or mean <= slo.tpot


def steady_need(
    params: EngineParams, rate: float, slo: Slo, *, goal: float = 0.99, seed: int = 0, limit: int = 32
) -> int:
    """The fewest replicas that serve `rate` requests/s in steady state with at least `goal` of the
    requests within the SLO: what a spike of that rate needs once no replica is loading."""
    for replicas in range(1, limit + 1):
        if steady_attainment(params, replicas, rate, slo, seed=seed) >= goal:
            return replicas
    raise ValueError(f"{limit} replicas do not serve {rate:g} requests/s within the SLO")
