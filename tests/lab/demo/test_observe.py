"""The demo's observation (`lab.demo.observe`): a tick with no Ready replica holds gaps, never zeros."""

from __future__ import annotations

import io
from pathlib import Path

from lab.demo.cluster.deployment import Deployment
from lab.demo.loadgen import SCENARIOS
from lab.demo.observe import Observer
from lab.demo.report import CSV_NAME, write_report
from lab.demo.request_log import RequestLog
from lab.demo.timeline import Timeline
from lab.demo.view import LiveView
from lab.emulator import EmulatedFleet
from lab.records import RequestRecord


async def test_no_ready_replica_is_recorded_as_a_gap_not_a_zero(tmp_path: Path) -> None:
    """While no replica is Ready there is no engine to report a queue or a KV cache, and no request finished
    with a first token in the window: the ticks hold gaps (empty CSV cells), never made-up zeros."""
    fleet = EmulatedFleet()
    timeline, log = Timeline(fleet.clock), RequestLog()
    view = LiveView(io.StringIO(), metric="m", target=1, max_replicas=4, peak_rps=1, interactive=False)
    observer = Observer(
        timeline,
        Deployment(fleet),
        log,
        profile=SCENARIOS["smoke"],
        capacity=1.0,
        metric=lambda: None,
        show=view.update,
    )
    try:
        timeline.begin()
        await fleet.add_replica(load_delay=3600.0)
        # a finished request whose first token went unrecorded
        log.record(RequestRecord(0.0, "ok", None, 0.01), at=timeline.now())
        await observer.observe()
        ready = await fleet.add_replica(load_delay=0.0)
        await ready.wait_ready()
        await observer.observe()
    finally:
        await fleet.stop()
    gap, served = observer.ticks
    assert (gap.ready, gap.waiting, gap.running, gap.kv_usage, gap.ttft_p90) == (0, None, None, None, None)
    assert (served.ready, served.waiting, served.running, served.kv_usage) == (1, 0, 0, 0.0)
    write_report(tmp_path / "out", observer.ticks, [])
    header, gap_row, served_row = (tmp_path / "out" / CSV_NAME).read_text().splitlines()
    cells = dict(zip(header.split(","), gap_row.split(","), strict=True))
    columns = ("waiting_requests", "running_requests", "kv_usage_fraction", "ttft_p90_seconds")
    assert [cells[k] for k in columns] == ["", "", "", ""]
    served_cells = dict(zip(header.split(","), served_row.split(","), strict=True))
    assert [served_cells[k] for k in columns[:3]] == ["0", "0", "0"]


class Gauges:
    def gauges(self) -> dict[str, int]:
        return {"queue_depth": 7, "dlq_depth": 1, "consumers": 2, "messages_lost": 0}


async def test_a_queue_run_records_the_queue_and_a_direct_run_leaves_it_unknown() -> None:
    """The queue's depths, consumers and lost messages go into each tick of a queue run, with the HPA's
    per-replica value; a run without a queue leaves those fields unknown (no queue panel is drawn)."""
    fleet = EmulatedFleet()
    timeline = Timeline(fleet.clock)
    kinds = {"queue": Gauges(), "direct": None}
    ticks = {}
    for kind, gauges in kinds.items():
        observer = Observer(
            timeline,
            Deployment(fleet),
            RequestLog(),
            profile=SCENARIOS["zero-idle"],
            capacity=1.0,
            metric=lambda: 14.0,
            per_replica=lambda: 7.0,
            show=lambda tick: None,
            queue=gauges,
        )
        await observer.observe()
        ticks[kind] = observer.ticks[0]
    queue, direct = ticks["queue"], ticks["direct"]
    assert (queue.queue_depth, queue.dlq_depth, queue.consumers, queue.messages_lost) == (7, 1, 2, 0)
    assert (queue.metric, queue.metric_per_replica) == (14.0, 7.0)
    assert (direct.queue_depth, direct.dlq_depth, direct.consumers, direct.messages_lost) == (None,) * 4
