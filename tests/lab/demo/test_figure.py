"""The demo's picture (`lab.demo.figure`): one panel per question an SRE asks of the run, each with its
objective drawn, the summary's verdict on top, legends clear of the lines, gaps as gaps."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from alerts.params import Params
from lab.demo.figure import DLQ_ALERT_THRESHOLD, KV_ALERT_THRESHOLD, ROW_INCHES, FigureContext, figure
from lab.demo.summary import UpstreamSummary, duration, summarize
from lab.records import cold_starts, queue_series, stage_spans
from tests.lab.demo.ticks import GAP_RUN, RUN, tick

PANELS = ("requests/s", "requests", "KV usage %", "TTFT seconds", "TPOT ms", "replicas")

# 1 replica; a scale-up to 3 at 60 whose two new replicas load until 90; 3 serving; a scale-down.
COLD = [
    tick(0, 1, ready=1, stage="idle"),
    tick(30, 1, ready=1, stage="ramp", ttft_p90=0.9),
    tick(60, 3, ready=1, stage="spike", ttft_p90=2.0),
    tick(75, 3, ready=1, stage="spike", ttft_p90=4.0),
    tick(90, 3, ready=3, stage="spike", ttft_p90=1.0),
    tick(120, 2, ready=2, desired=2, stage="idle"),
]
CONTEXT = FigureContext(
    title="vllm_requests_inflight AverageValue 12, profile test",
    capacity=1.5,
    metric="vllm_requests_inflight",
    target=12.0,
    tolerance=0.1,
    max_replicas=8,
)


@pytest.fixture(scope="module")
def drawn() -> Iterator[Figure]:
    """One drawn figure of `COLD`, shared: the tests only read it."""
    made = figure(COLD, dataclasses.replace(CONTEXT, summary=summarize(COLD, [])))
    made.canvas.draw()
    yield made
    plt.close(made)


def panels(made: Figure) -> dict[str, Axes]:
    return {axis.get_ylabel(): axis for axis in made.axes if axis.get_ylabel()}


def line(axis: Axes, label: str) -> Line2D:
    return next(ln for ln in axis.get_lines() if ln.get_label() == label)


def ydata(artist: Line2D) -> list[float]:
    return [float(v) for v in np.asarray(artist.get_ydata(), dtype=float)]


def test_one_panel_per_question_and_the_metric_on_its_own(drawn: Figure) -> None:
    """Load, queue, KV, TTFT, TPOT, replicas and the HPA's metric each have a panel of their own (no twin
    axes: replicas and the per-replica metric no longer share one)."""
    found = panels(drawn)
    assert set(PANELS) <= set(found)
    metric = next(axis for label, axis in found.items() if label.startswith("vllm_requests_inflight"))
    assert "per replica" in metric.get_ylabel()
    assert [ln.get_label() for ln in metric.get_lines()][:2] == [
        "total ÷ replicas at the tick",
        "target 12",
    ]
    assert len(drawn.axes) == len(PANELS) + 2  # the header and the metric panel


def test_the_per_replica_metric_is_the_hpas_own_when_recorded() -> None:
    """After a scale-up from 1 to 3 the HPA had divided 29 by 1 replica, not by the 3 of the next tick: the
    recorded value wins over total ÷ replicas at the tick, and the legend says which one is drawn."""
    ticks = [
        dataclasses.replace(s, metric=29.0, metric_per_replica=29.0 if s.t == 60 else None) for s in COLD
    ]
    made = figure(ticks, CONTEXT)
    axis = next(axis for label, axis in panels(made).items() if label.startswith("vllm_requests_inflight"))
    values = ydata(line(axis, "per replica, as the HPA saw it"))
    plt.close(made)
    assert values[2] == 29.0 and values[3] == pytest.approx(29.0 / 3)


def test_load_panel_draws_the_capacity_of_the_ready_replicas(drawn: Figure) -> None:
    capacity = line(panels(drawn)["requests/s"], "capacity: Ready × 1.50 req/s")
    assert ydata(capacity) == [1.5, 1.5, 1.5, 1.5, 4.5, 3.0]


def test_objectives_are_drawn_where_they_are(drawn: Figure) -> None:
    """KV at the alert's threshold (the alerts' own default), TTFT and TPOT at the run's SLO."""
    found = panels(drawn)
    assert Params().kv_cache_usage_threshold == KV_ALERT_THRESHOLD
    assert ydata(line(found["KV usage %"], "nearly full: alert at 85%")) == [85.0, 85.0]
    assert ydata(line(found["TTFT seconds"], "SLO 500 ms")) == [0.5, 0.5]
    assert ydata(line(found["TPOT ms"], "SLO 50 ms")) == [50.0, 50.0]


def test_tpot_axis_reaches_past_its_slo_even_when_tpot_is_tiny(drawn: Figure) -> None:
    """The run's TPOT is ~2 ms; the axis still shows the 50 ms SLO with room above it."""
    low, high = panels(drawn)["TPOT ms"].get_ylim()
    assert low == 0 and high >= 55


def test_ttft_axis_holds_the_slo_and_every_value(drawn: Figure) -> None:
    axis = panels(drawn)["TTFT seconds"]
    low, high = axis.get_ylim()
    assert axis.get_yscale() == "log"
    assert low < 0.018 and high > 4.0


def test_tpot_mean_is_drawn_when_recorded() -> None:
    ticks = [dataclasses.replace(s, tpot_mean=0.03) for s in COLD]
    made = figure(ticks, CONTEXT)
    assert ydata(line(panels(made)["TPOT ms"], "TPOT mean (the adapter's)"))[0] == pytest.approx(30.0)
    plt.close(made)


def test_replicas_show_desired_ready_loading_and_a_visible_existing_line(drawn: Figure) -> None:
    """Ready and loading are stacked areas whose top is `existing`; `desired` is a wide translucent line
    under the thin `existing` one, so where the two are equal both still show."""
    axis = panels(drawn)["replicas"]
    _, labels = axis.get_legend_handles_labels()
    assert labels[:4] == ["ready", "loading (cold start)", "desired", "existing"]
    desired, existing = line(axis, "desired"), line(axis, "existing")
    assert existing.get_zorder() > desired.get_zorder()
    assert desired.get_linewidth() >= 3 * existing.get_linewidth()
    assert ydata(existing) == [1, 1, 3, 3, 3, 2]
    assert ydata(desired) == [1, 1, 3, 3, 3, 2]
    assert axis.get_ylim()[1] > 8  # the maximum's line shows


def test_cold_starts_and_stages_are_marked(drawn: Figure) -> None:
    """Stretches with a replica loading are orange bands through every panel (named in the top legend);
    stages are named above the top panel."""
    assert cold_starts(COLD) == [(60, 90)]
    assert stage_spans(COLD) == [("idle", 0, 30), ("ramp", 30, 60), ("spike", 60, 120), ("idle", 120, 120)]
    top = panels(drawn)["requests/s"]
    assert "cold start (a replica loading)" in top.get_legend_handles_labels()[1]
    names = {text.get_text() for text in top.texts}
    assert {"idle", "ramp", "spike"} <= names


def test_summary_figures_are_in_the_image_as_printed(drawn: Figure) -> None:
    """The header repeats the summary's figures exactly as
    `summary.txt` prints them; a p90 over its SLO is red."""
    summary = summarize(COLD, [])
    header = drawn.axes[0]
    texts = {text.get_text().strip(): text for text in header.texts}
    assert f"SLO attainment {summary.attainment_text()}" in texts
    assert f"{summary.replica_minutes_text()} over 2.0 min" in texts
    assert f"TTFT p90 {duration(summary.ttft_p90)}" in texts
    for figure_text in (summary.attainment_text(), summary.replica_minutes_text()):
        assert figure_text in summary.text()
    assert texts["TTFT p90 n/a"].get_color() == "black"


def test_a_p90_over_its_slo_is_red() -> None:
    summary = dataclasses.replace(summarize(COLD, []), ttft_p90=64.14, tpot_p90=0.038)
    made = figure(COLD, dataclasses.replace(CONTEXT, summary=summary))
    texts = {text.get_text().strip(): text for text in made.axes[0].texts}
    assert texts["TTFT p90 64.1 s"].get_color() == "tab:red"
    assert texts["TPOT p90 38 ms"].get_color() == "black"
    plt.close(made)


def test_a_queue_run_adds_its_summary_rows_to_the_header() -> None:
    """A run through an upstream queue adds the queue's line (red when a message is dead-lettered or lost),
    the GPU-replica-hours against the baseline, and the time at zero; the header grows by those two rows."""
    upstream = UpstreamSummary(
        queue="inference-requests",
        messages_sent=890,
        messages_done=886,
        dlq_depth=4,
        messages_lost=0,
        replica_hours=1.02,
        baseline_replica_hours=1.4,
        baseline_min_replicas=1,
        seconds_at_zero=580.0,
        wake_ups=1,
        first_wait_after_zero=74.6,
        first_done_after_zero=88.3,
    )
    summary = dataclasses.replace(summarize(COLD, []), upstream=upstream)
    plain = figure(COLD, dataclasses.replace(CONTEXT, summary=summarize(COLD, [])))
    made = figure(COLD, dataclasses.replace(CONTEXT, summary=summary))
    texts = {text.get_text().strip(): text for text in made.axes[0].texts}
    grown = made.get_size_inches()[1] - plain.get_size_inches()[1]
    plt.close(made)
    plt.close(plain)
    queue = "queue inference-requests: 890 sent, 886 done, 4 in the DLQ, 0 lost"
    assert texts[queue].get_color() == "tab:red"
    assert "cost 1.02 GPU-replica-hours vs 1.40 with minReplicas 1 (27% saved)" in texts
    assert any(text.startswith("zero replicas 580 s at zero; 1 wake-up(s)") for text in texts)
    assert grown == pytest.approx(2 * ROW_INCHES)


def test_no_legend_overlaps_any_plot(drawn: Figure) -> None:
    """Legends sit to the right of the plots: no line, band or target can cross them."""
    renderer = drawn.canvas.get_renderer()  # type: ignore[attr-defined]
    plots = [axis.get_window_extent(renderer) for axis in drawn.axes[1:]]
    legends = [axis.get_legend() for axis in drawn.axes[1:]]
    for legend in legends:
        assert legend is not None
        box = legend.get_window_extent(renderer)
        assert not any(box.overlaps(plot) for plot in plots), legend.get_texts()[0].get_text()
        assert box.x1 <= drawn.bbox.x1  # inside the image


def test_gaps_are_breaks_not_zeros() -> None:
    """Unknown values are NaN in every plotted line (a break), never a drop to zero."""
    made = figure(GAP_RUN, CONTEXT)
    found = panels(made)
    plt.close(made)
    queue, kv = found["requests"], found["KV usage %"]
    for values in (
        ydata(line(queue, "waiting")),
        ydata(line(queue, "running")),
        ydata(line(kv, "KV cache usage")),
    ):
        assert [math.isnan(v) for v in values] == [False, True, True, False, False]
    assert ydata(line(queue, "waiting"))[0] == 5 and ydata(line(kv, "KV cache usage"))[3] == 25.0
    ttft = ydata(line(found["TTFT seconds"], "TTFT p90 (30 s window)"))
    assert [math.isnan(v) for v in ttft] == [False, True, True, False, False]


def test_a_value_target_plots_the_value_against_it() -> None:
    """For a Value target the HPA compares the metric itself: no per-replica division."""
    ticks = [dataclasses.replace(s, metric=0.9) for s in COLD]
    context = dataclasses.replace(CONTEXT, metric="vllm_kv_cache_usage", target_type="Value", target=0.8)
    made = figure(ticks, context)
    axis = panels(made)["vllm_kv_cache_usage\nvalue"]
    assert ydata(line(axis, "vllm_kv_cache_usage")) == [0.9] * len(ticks)
    plt.close(made)


def test_upstream_queue_panel_only_when_the_run_had_one() -> None:
    """A run through an upstream queue gets a messages panel (queue, DLQ with the alert's threshold, lost) and
    its consumers on the replicas panel; a run without a queue has neither."""
    assert queue_series(RUN) == {}
    ticks = [
        dataclasses.replace(
            s, queue_depth=i * 10, dlq_depth=None if i == 0 else 1, messages_lost=0, consumers=s.ready
        )
        for i, s in enumerate(COLD)
    ]
    assert list(queue_series(ticks)) == ["upstream queue", "dead-letter queue", "lost"]
    made = figure(ticks, CONTEXT)
    found = panels(made)
    plt.close(made)
    messages = found["messages"]
    assert ydata(line(messages, "upstream queue")) == [0, 10, 20, 30, 40, 50]
    assert math.isnan(ydata(line(messages, "dead-letter queue"))[0])
    assert ydata(line(messages, "lost (none)")) == [0] * 6
    assert Params().dlq_depth_threshold == DLQ_ALERT_THRESHOLD
    assert ydata(line(messages, "DLQ pages above 10")) == [10, 10]
    assert ydata(line(found["replicas"], "queue consumers")) == [1, 1, 1, 1, 3, 2]
    plain = figure(COLD, CONTEXT)
    assert "messages" not in panels(plain)
    assert "queue consumers" not in panels(plain)["replicas"].get_legend_handles_labels()[1]
    plt.close(plain)
