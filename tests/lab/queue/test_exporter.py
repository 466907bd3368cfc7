"""The queue's `/metrics` page (`lab.queue.exporter`): the CloudWatch exporter's SQS series, as the
adapter's own exposition parser reads it, served over HTTP."""

from __future__ import annotations

import aiohttp

from adapter.sources.page_parser import Parser
from adapter.vocabulary.exporters import SQS_VISIBLE
from lab.clock import ScaledClock
from lab.queue import MessageQueue, exposition, serve_exporter


def two_queues() -> tuple[MessageQueue[str], MessageQueue[str]]:
    clock = ScaledClock()
    dlq: MessageQueue[str] = MessageQueue("inference-requests-dlq", clock)
    main: MessageQueue[str] = MessageQueue("inference-requests", clock, dead_letter=dlq)
    return main, dlq


def test_the_page_has_one_visible_series_per_queue_with_the_exporters_labels() -> None:
    """`aws_sqs_approximate_number_of_messages_visible_average{queue_name=...}` for the queue and its DLQ,
    with the exporter's `job` and `instance` labels; messages in flight are not visible."""
    main, dlq = two_queues()
    for body in "abc":
        main.send(body)
    main.receive(1)
    dlq.send("dead")
    text = exposition([main, dlq])
    assert f"# TYPE {SQS_VISIBLE} gauge" in text
    page = Parser([SQS_VISIBLE]).parse(text)
    by_queue = {dict(labels)["queue_name"]: value for labels, value in page[SQS_VISIBLE].items()}
    assert by_queue == {"inference-requests": 2.0, "inference-requests-dlq": 1.0}
    labels = dict(next(iter(page[SQS_VISIBLE])))
    assert (labels["job"], labels["instance"]) == ("aws_sqs", "")


def test_a_queue_name_is_escaped_in_its_label() -> None:
    clock = ScaledClock()
    odd: MessageQueue[str] = MessageQueue('a"b\\c', clock)
    page = Parser([SQS_VISIBLE]).parse(exposition([odd]))
    assert [dict(labels)["queue_name"] for labels in page[SQS_VISIBLE]] == ['a"b\\c']


async def test_the_exporter_serves_the_page_over_http() -> None:
    main, dlq = two_queues()
    main.send("a")
    async with serve_exporter([main, dlq]) as url, aiohttp.ClientSession() as session:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        async with session.get(url) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = await response.text()
    assert text == exposition([main, dlq])
    assert 'queue_name="inference-requests",} 1.0' in text
