"""The queue's depths on an HTTP `/metrics` page, as the Prometheus CloudWatch exporter shows SQS.

The CloudWatch exporter names a metric `aws_<namespace>_<metric in snake case>_<statistic>` and turns
each dimension into a label, so `ApproximateNumberOfMessagesVisible` of queue `inference-requests`
(statistic Average) is `aws_sqs_approximate_number_of_messages_visible_average{queue_name=
"inference-requests"}`, with the exporter's own `job` and `instance` labels. The page carries exactly
that series for the queue and its dead-letter queue, so the PromQL of `queue_depth` and `dlq_depth`
in docs/config.example.yaml, the alerts and the dashboards read it unchanged.

Not reproduced: CloudWatch's delay (its datapoints are minutes old; here the value is the queue's now)
and the exporter's sample timestamps (omitted, as with its `set_timestamp: false`).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final

from aiohttp import web

from adapter.vocabulary.exporters import SQS_VISIBLE
from lab.queue.broker import MessageQueue

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
#: the exporter's `job` label value for the AWS/SQS namespace
JOB: Final = "aws_sqs"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition(queues: Sequence[MessageQueue[Any]]) -> str:
    """The page: HELP and TYPE, then one visible-messages sample per queue."""
    lines = [
        f"# HELP {SQS_VISIBLE} CloudWatch metric AWS/SQS ApproximateNumberOfMessagesVisible "
        "Dimensions: [QueueName] Statistic: Average Unit: Count",
        f"# TYPE {SQS_VISIBLE} gauge",
    ]
    # The exporter's Java client leaves a comma after the last label; parsers accept it.
    lines += [
        f'{SQS_VISIBLE}{{job="{JOB}",instance="",queue_name="{_escape(q.name)}",}} {float(q.visible)!r}'
        for q in queues
    ]
    return "\n".join(lines) + "\n"


def page_app(render: Callable[[], str]) -> web.Application:
    """An application serving `GET /metrics` with what `render()` writes at each request."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=render().encode(), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def serve_exporter(
    queues: Sequence[MessageQueue[Any]], host: str = "127.0.0.1"
) -> contextlib.AbstractAsyncContextManager[str]:
    """Serve the queues' exporter page (`serve_page`); yields its `/metrics` URL."""
    return serve_page(lambda: exposition(queues), host)


@contextlib.asynccontextmanager
async def serve_page(render: Callable[[], str], host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve `render()` on `/metrics` on a free port of `host` until the block exits; yields the URL."""
    runner = web.AppRunner(page_app(render), access_log=None)
    await runner.setup()
    # Binding port 0 ourselves gives a free port with no window for another process to take it.
    sock = socket.socket()
    try:
        sock.bind((host, 0))
        await web.SockSite(runner, sock).start()
        yield f"http://{host}:{sock.getsockname()[1]}/metrics"
    finally:
        await runner.cleanup()
        sock.close()
