"""The gateway in front of the fleet: routes each request to a Ready replica, as the Service does, and
counts it on arrival, as Envoy counts a request to an upstream cluster.

vLLM counts a request only when it finishes (`vllm:request_success_total`) and shows what it holds
(`num_requests_running`, `num_requests_waiting`); nothing in its `/metrics` says how fast requests
*arrive*, which is what a fleet needs to serve, and which differs from what it finishes exactly
when it is short of replicas. The proxy in front of it knows: Envoy (and the gateways built on it,
such as the Gateway API inference extension's) increments `envoy_cluster_upstream_rq_total` when it
sends a request upstream, so `rate()` of it is the arrival rate. (`istio_requests_total` is recorded
at the response, a completion count.) The page is served for the demo's PromQL stand-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from lab.demo.cluster.traffic import Service
from lab.emulator import Request

#: Envoy's counter of requests sent to an upstream cluster (label `envoy_cluster_name`).
UPSTREAM_REQUESTS: Final = "envoy_cluster_upstream_rq_total"


class Gateway:
    """A Service in front of `service` that counts every request it receives."""

    def __init__(self, service: Service, cluster: str) -> None:
        self.service = service
        self.cluster = cluster
        self.arrivals = 0

    async def complete(
        self, prompt: Sequence[int] | int, max_tokens: int | None = None, *, ignore_eos: bool = False
    ) -> Request:
        """Count the request, then send it on."""
        self.arrivals += 1
        return await self.service.complete(prompt, max_tokens, ignore_eos=ignore_eos)

    def page(self) -> str:
        """The gateway's `/metrics`: the counter, as Envoy's Prometheus endpoint writes it."""
        return (
            f"# TYPE {UPSTREAM_REQUESTS} counter\n"
            f'{UPSTREAM_REQUESTS}{{envoy_cluster_name="{self.cluster}"}} {self.arrivals}\n'
        )
