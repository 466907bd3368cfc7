"""The demo's live view (`lab.demo.view`): SLO breaches flagged, TPOT as the adapter's mean, and the
per-replica average explained while replicas load."""

from __future__ import annotations

import dataclasses
import io

from lab.demo.view import LiveView, breaches, render_line, render_panel
from lab.slo import Slo
from tests.lab.demo.ticks import RUN, gap, tick

# The issue's moment: 58 requests wait, 4 of 8 replicas still load, and the average over all 8 is at target.
LOADING = dataclasses.replace(
    tick(95, 8, ready=4, waiting=58, stage="spike", ttft_p90=10.8637, tpot_mean=0.0312), metric=99.2
)


def panel(s: object = LOADING, **options: object) -> str:
    kwargs: dict[str, object] = {
        "metric": "vllm_requests_inflight",
        "target": 12,
        "max_replicas": 8,
        "peak_rps": 20,
    }
    return "\n".join(render_panel(s, **(kwargs | options)))  # type: ignore[arg-type]


def test_panel_shows_every_quantity_of_the_issue() -> None:
    """The live view shows offered load, waiting, running,
    KV usage, TTFT, TPOT, desired and ready replicas."""
    text = panel(RUN[1])
    for expected in (
        "offered   10.0 req/s",
        "waiting       40",
        "running     3",
        "KV  25.0%",
        "TTFT p90    18.0 ms",
    ):
        assert expected in text
    assert "desired   3  ready   2  loading   1" in text
    assert "██░·····" in text  # 2 serving, 1 loading, 5 absent of max 8


def test_per_replica_says_when_loading_replicas_are_in_the_average() -> None:
    """The HPA divides by every replica that exists; the panel says how many of them are still loading, so
    an average at target while 58 requests wait is explained, not puzzling."""
    assert "vllm_requests_inflight per replica 12.4 (target 12; 4 of 8 replicas loading)" in panel()
    settled = dataclasses.replace(LOADING, ready=8)
    assert "per replica 12.4 (target 12)" in panel(settled)
    assert "per_replica=12.4" in render_line(LOADING)


def test_a_value_target_shows_the_value_not_a_per_replica_average() -> None:
    kv = dataclasses.replace(LOADING, metric=0.93)
    text = panel(kv, metric="vllm_kv_cache_usage", target=0.8, per_replica_target=False)
    assert "vllm_kv_cache_usage 0.93 (target 0.8)" in text
    assert "per replica" not in text
    assert "per_replica=" not in render_line(kv, per_replica_target=False)


def test_ttft_over_its_slo_is_flagged() -> None:
    """TTFT p90 over the SLO reads `OVER SLO`; under it the SLO is shown for reference only."""
    assert "TTFT p90    10.86 s OVER SLO 500 ms" in panel()
    assert "TTFT p90    18.0 ms (SLO 500 ms)" in panel(RUN[1])
    assert "OVER" not in panel(RUN[1])
    assert "OVER SLO" not in panel(slo=Slo(ttft=20.0))  # the run's SLO, not the default


def test_tpot_is_the_mean_the_adapter_serves_and_is_flagged_over_its_slo() -> None:
    """The view shows TPOT's mean (what `vllm_tpot_seconds` serves), not its p90; over 50 ms it is flagged."""
    text = panel()
    assert "TPOT mean   31.2 ms (SLO 50 ms)" in text
    assert "p90 2.1" not in text and "TPOT p90" not in text
    slow = dataclasses.replace(LOADING, tpot_mean=0.061)
    assert "TPOT mean   61.0 ms OVER SLO 50 ms" in panel(slow)
    assert breaches(slow, Slo()) == ["TTFT", "TPOT"]
    assert breaches(RUN[1], Slo()) == []


def test_line_names_the_breaches() -> None:
    """One `key=value` line per tick; `slo_breach=` lists what is over its SLO and is absent otherwise."""
    line = render_line(LOADING)
    assert "ttft_p90=10.86s" in line and "tpot_mean=31.2ms" in line
    assert line.endswith("slo_breach=TTFT")
    assert "slo_breach" not in render_line(RUN[1])
    assert "slo_breach=TTFT" not in render_line(LOADING, slo=Slo(ttft=11.0))


def test_live_view_redraws_on_a_terminal_and_prints_lines_elsewhere() -> None:
    """On a terminal the panel is redrawn in place (cursor up + clear per line); in a pipe every n-th tick
    is one plain line without escape codes."""
    terminal = io.StringIO()
    view = LiveView(terminal, metric="m", target=1, max_replicas=4, peak_rps=10, interactive=True)
    view.update(RUN[0])
    view.update(RUN[1])
    assert terminal.getvalue().count("\x1b[1A\x1b[2K") == len(
        render_panel(RUN[0], metric="m", target=1, max_replicas=4, peak_rps=10)
    )

    pipe = io.StringIO()
    view = LiveView(pipe, metric="m", target=1, max_replicas=4, peak_rps=10, interactive=False, every=2)
    for s in RUN:
        view.update(s)
    assert pipe.getvalue().splitlines() == [render_line(RUN[0]), render_line(RUN[2]), render_line(RUN[4])]
    assert "\x1b" not in pipe.getvalue()
    assert "metric=-" in render_line(RUN[2])


def test_live_view_flags_against_the_slo_it_is_given() -> None:
    pipe = io.StringIO()
    LiveView(
        pipe, metric="m", target=1, max_replicas=8, peak_rps=10, interactive=False, slo=Slo(ttft=20.0)
    ).update(LOADING)
    assert "slo_breach" not in pipe.getvalue()


def test_views_show_a_gap_as_a_dash() -> None:
    """The live panel and line print `-` for unknown waiting, running, KV usage and latencies, never 0."""
    line = render_line(gap(60, 2))
    assert "waiting=- running=- kv=- ttft_p90=- tpot_mean=- metric=- per_replica=-" in line
    text = panel(gap(60, 2))
    assert "waiting        -   running     -   KV      -" in text
    assert "TTFT p90          - (SLO 500 ms)" in text


def test_a_queue_run_shows_the_upstream_queue() -> None:
    """Through an upstream queue the panel and the line add the queue, its DLQ, the consumers and the lost
    count; without a queue they say nothing of one."""
    queued = dataclasses.replace(LOADING, queue_depth=330, dlq_depth=4, consumers=4, messages_lost=0)
    assert "upstream  queue    330 messages  DLQ    4  consumers   4  lost 0" in panel(queued)
    assert "queue=330 dlq=4 lost=0" in render_line(queued)
    assert "upstream" not in panel() and "queue=" not in render_line(LOADING)
