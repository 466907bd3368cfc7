"""The upstream queue in the demo: the queue and its dead-letter queue, their consumers, their exporter,
and the adapter configuration that serves `queue_depth` and `dlq_depth` from it.

`Upstream` is the clients' Service (messages instead of direct requests), the Deployment's pod hooks
(a consumer per Ready replica, drained in preStop) and the observer's queue gauges. The adapter gets
the user metrics exactly as docs/config.example.yaml defines them, validated by the adapter's own
loader as for a Prometheus source; the demo has no Prometheus, so `lab.demo.cluster.pages` evaluates that
PromQL on the exporter's page while the scrape source keeps serving the vLLM metrics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from adapter.config import Config
from lab.demo.cluster.pages import stand_in_config
from lab.demo.summary import UpstreamFacts
from lab.emulator import EmulatedFleet, EmulatedReplica, Request
from lab.queue import ConsumerPool, Job, Message, MessageQueue, QueueService

#: The queue of docs/config.example.yaml (its dead-letter queue is `<name>-dlq`).
QUEUE_NAME: Final = "inference-requests"

#: `queue_depth` and `dlq_depth` as docs/config.example.yaml defines them (tests hold the two equal).
QUEUE_METRICS: Final[dict[str, dict[str, Any]]] = {
    "queue_depth": {
        "query": f'sum(aws_sqs_approximate_number_of_messages_visible_average{{queue_name="{QUEUE_NAME}", '
        "<<.LabelMatchers>>})",
        "presence": f'aws_sqs_approximate_number_of_messages_visible_average{{queue_name="{QUEUE_NAME}", '
        "<<.LabelMatchers>>}",
        "namespaced": False,
        "on_empty": "error",
        "max_age": "10m",
        "help": "Messages waiting in the upstream SQS queue.",
        "unit": "messages",
    },
    "dlq_depth": {
        "query": 'max(aws_sqs_approximate_number_of_messages_visible_average{queue_name=~".*[-_.]dlq", '
        "<<.LabelMatchers>>})",
        "namespaced": False,
        "unit": "messages",
    },
}


@dataclass(frozen=True)
class QueueSettings:
    """The upstream queue of a demo run (durations in emulated seconds)."""

    name: str = QUEUE_NAME
    visibility_timeout: float = 60.0
    """How long a received message stays hidden; longer than a request takes, shorter than a night."""
    max_receive_count: int = 3
    """Receives before the redrive policy moves a message to `<name>-dlq`."""
    concurrency: int | None = None
    """Messages a consumer holds at once; `None`: the HPA's in-flight target, 0.75 x `max_num_seqs`.
    A consumer that never holds more than that target keeps the in-flight metric from asking for
    replicas while a backlog waits: the queue's depth is then the one signal of work not started."""
    poison: float = 0.005
    """Share of requests no replica can serve (a prompt beyond max_model_len): they end in the DLQ."""


def queue_adapter_config(namespace: str, scrape_interval: float) -> Config:
    """The demo adapter's configuration with the queue metrics (`lab.demo.pages.stand_in_config`)."""
    return stand_in_config(namespace, scrape_interval, QUEUE_METRICS)


class Upstream:
    """The queue, its DLQ, the producers' Service and one consumer per Ready replica."""

    def __init__(self, settings: QueueSettings, fleet: EmulatedFleet) -> None:
        self.settings = settings
        self.fleet = fleet
        clock = fleet.clock
        self.dlq: MessageQueue[Job] = MessageQueue(f"{settings.name}-dlq", clock)
        self.queue: MessageQueue[Job] = MessageQueue(
            settings.name,
            clock,
            visibility_timeout=settings.visibility_timeout,
            max_receive_count=settings.max_receive_count,
            dead_letter=self.dlq,
        )
        self.service = QueueService(self.queue)
        self.pool = ConsumerPool(
            self.queue,
            self.service.work_for,
            concurrency=settings.concurrency or max(1, int(0.75 * fleet.params.max_num_seqs)),
        )
        self._wakes: list[Message[Job]] = []
        """The first message sent after the fleet reached zero, once per stretch at zero."""
        self._marked = False

    @property
    def queues(self) -> Sequence[MessageQueue[Job]]:
        """What the exporter shows: the queue, then its dead-letter queue."""
        return (self.queue, self.dlq)

    # --- the clients' Service ----------------------------------------------------------------------

    async def complete(
        self, prompt: Sequence[int] | int, max_tokens: int | None = None, *, ignore_eos: bool = False
    ) -> Request:
        """Send through the queue and wait for the outcome; the first message sent while no replica
        exists is remembered, to tell how long a wake-up from zero made it wait."""
        message = self.service.send(prompt, max_tokens, ignore_eos=ignore_eos)
        if self.fleet.replicas:
            self._marked = False
        elif not self._marked:
            self._wakes.append(message)
            self._marked = True
        return await asyncio.shield(message.body.outcome)

    # --- the pods' hooks -----------------------------------------------------------------------------

    def started(self, replica: EmulatedReplica) -> None:
        """postStart: a consumer for the replica once it is Ready."""
        self.pool.started(replica)

    async def pre_stop(self, replica: EmulatedReplica, grace: float | None = None) -> int:
        """preStop: drain the replica's consumer before its engine stops."""
        return await self.pool.pre_stop(replica, grace)

    # --- what the ticks and the summary read ------------------------------------------------------

    def gauges(self) -> dict[str, int]:
        """The queue's `Tick` fields now."""
        return {
            "queue_depth": self.queue.visible,
            "dlq_depth": self.dlq.visible,
            "consumers": self.pool.pulling,
            "messages_lost": len(self.queue.missing()),
        }

    def facts(
        self,
        origin: float,
        *,
        baseline_replica_hours: float | None = None,
        baseline_min_replicas: int | None = None,
    ) -> UpstreamFacts:
        """What the summary needs beyond the ticks; `origin` is the clock's time at t = 0 of the run."""
        waits = []
        for message in self._wakes:
            outcome = message.body.outcome
            done = (
                outcome.result()
                if outcome.done() and not outcome.cancelled() and outcome.exception() is None
                else None
            )
            waits.append(
                (
                    message.sent - origin,
                    None if message.first_received is None else message.first_received - message.sent,
                    None if done is None or done.finished is None else done.finished - message.sent,
                )
            )
        return UpstreamFacts(
            queue=self.queue.name,
            sent=self.queue.counts.sent,
            done=self.queue.counts.deleted,
            dead_lettered=self.dlq.visible + self.dlq.in_flight,
            lost=len(self.queue.missing()),
            wake_waits=tuple(waits),
            baseline_replica_hours=baseline_replica_hours,
            baseline_min_replicas=baseline_min_replicas,
        )
