"""An emulated upstream queue (SQS-like) in front of the emulated fleet: what lets a model scale to zero
without losing a request.

Producers send requests as messages; one consumer per Ready replica pulls up to a concurrency limit
and runs them on its vLLM; a failed message comes back after its visibility timeout and goes to the
dead-letter queue after too many receives; a replica about to stop has its consumer drained first.
While no replica exists, messages simply wait, and the queue's depth, exported as the CloudWatch
exporter names SQS, is the External metric that wakes the HPA.

Modules, one concept each:

* `broker`: `MessageQueue`, SQS semantics in emulated time (receive, visibility, delete, redrive, accounting).
* `consumer`: `Consumer`, one replica's puller with its concurrency limit and `drain`.
* `pool`: `ConsumerPool`, a consumer per Ready replica: started when Ready, drained in the preStop hook.
* `service`: `QueueService`, the producers' side (`complete` as a Service) and the consumers' work.
* `exporter`: the `/metrics` page in the CloudWatch exporter's naming, served over HTTP (the demo's
  adapter evaluates `queue_depth` and `dlq_depth` on it: `lab.demo.cluster.pages`).
"""

from lab.queue.broker import Counts, EmulatedClock, Message, MessageQueue
from lab.queue.consumer import Consumer, Work
from lab.queue.exporter import exposition, serve_exporter, serve_page
from lab.queue.pool import ConsumerPool
from lab.queue.service import DeadLettered, Job, QueueService

__all__ = [
    "Consumer",
    "ConsumerPool",
    "Counts",
    "DeadLettered",
    "EmulatedClock",
    "Job",
    "Message",
    "MessageQueue",
    "QueueService",
    "Work",
    "exposition",
    "serve_exporter",
    "serve_page",
]
