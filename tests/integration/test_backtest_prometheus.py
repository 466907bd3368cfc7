"""`backtest` reads its history from a real Prometheus, whose TSDB was built by promtool from vLLM series.

Three pods' histories are written as OpenMetrics and turned into TSDB blocks with
`promtool tsdb create-blocks-from openmetrics`; a real Prometheus serves them. So range queries, step
alignment, `increase()` extrapolation and counter resets are Prometheus's own, not a mock's:

* `llama-1b-dummy`: the real capture (labels and starting counters of `metrics-idle.prom`) playing
  the stage table of `load-stages.csv`, whose offered load the reader must recover;
* `steady`: a made trace at a steady 10 req/s whose pod restarts half-way (counters reset to 0);
* `holey`: a made trace whose scrapes fail for two minutes (a gap, never zero traffic).
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter import cli
from lab.backtest.inputs.prometheus_history import PrometheusHistoryError, RangeRequest, read_prometheus
from tests.integration.procs import Process, free_port, prometheus, require_binary
from tests.lab.backtest.tsdb import (
    REAL,
    Second,
    create_blocks,
    openmetrics,
    pod_series,
    real_idle,
    stage_seconds,
)

pytestmark = pytest.mark.integration

# Three hours back: inside Prometheus's default 15 d retention, past its head block, never in the future.
START = float(int(time.time()) // 60 * 60 - 3 * 3600)
STAGES = list(csv.DictReader((REAL / "load-stages.csv").open(encoding="utf-8")))
STEADY_SECONDS = 1200
RESET_AT = 600
HOLE = (400.0, 520.0)


@pytest.fixture(scope="module")
def history_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """A Prometheus serving the three pods' history (no scrape targets of its own)."""
    workdir = tmp_path_factory.mktemp("backtest-prometheus")
    labels, base = real_idle()
    real = pod_series(
        stage_seconds(STAGES), start=START, labels={**labels, "instance": "llama-0:8000"}, base=base
    )
    steady = [Second(completed=10.0, running=5.0, waiting=0.0, kv=0.2)] * STEADY_SECONDS
    restarted = pod_series(
        steady,
        start=START,
        labels={"model_name": "steady", "engine": "0", "instance": "steady-0:8000"},
        reset_at=RESET_AT,
    )
    holey = pod_series(
        steady,
        start=START,
        labels={"model_name": "holey", "engine": "0", "instance": "holey-0:8000"},
        hole=HOLE,
    )
    create_blocks(openmetrics(real, restarted, holey), workdir / "data", require_binary("promtool"))
    with prometheus(workdir, [], port=free_port()) as process:
        yield process


def _read(url: str, start: float, end: float, selector: str, step: float = 15.0) -> object:
    return asyncio.run(read_prometheus(RangeRequest(url, start, end, step, selector)))


def test_the_real_stage_tables_offered_load_is_recovered_from_completions_and_queue(
    history_prometheus: Process,
) -> None:
    """Arrivals = Δfinished + Δ(running + waiting): over each loaded stage the recovered rate is the
    rate the client sent (`client_sent_rps`), within 5 %; the history carries the token shapes."""
    # The first scrape is at START + 5 s: the range opens there.
    history = _read(history_prometheus.url, START + 5, START + 255, "model_name=llama-1b-dummy", step=5.0)
    assert history.gaps() == []  # type: ignore[attr-defined]
    rates = history.rates()  # type: ignore[attr-defined]
    checked = 0
    for row in STAGES:
        t0, t1, sent = float(row["t0"]), float(row["t1"]), float(row["client_sent_rps"])
        if sent < 5 or t1 - t0 < 20:
            continue
        # Stage edges are averaged over a step: judge the steps fully inside the stage.
        inside = [rates[i] for i in range(len(rates)) if t0 + 5 <= 5 + i * 5 and 10 + i * 5 <= t1 - 5]
        recovered = sum(inside) / len(inside)
        assert recovered == pytest.approx(sent, rel=0.05), row["window"]
        checked += 1
    assert checked >= 8
    output = [v for v in history.output_tokens if not math.isnan(v)]  # type: ignore[attr-defined]
    assert 250 < sum(output) / len(output) < 330  # 64-512 output tokens, mean 288


def test_a_counter_reset_is_prometheuss_business(history_prometheus: Process) -> None:
    """The pod restarted half-way (counters back to 0): the recovered traffic is still 10 req/s."""
    history = _read(history_prometheus.url, START + 15, START + STEADY_SECONDS, "model_name=steady")
    assert history.gaps() == []  # type: ignore[attr-defined]
    assert history.requests == pytest.approx(10 * (STEADY_SECONDS - 15), rel=0.03)  # type: ignore[attr-defined]
    assert min(history.rates()) > 8  # type: ignore[attr-defined]


def test_a_scrape_gap_is_reported_not_read_as_zero_traffic(history_prometheus: Process) -> None:
    """Two minutes without samples are a gap of about two minutes; the rest is 10 req/s."""
    history = _read(history_prometheus.url, START + 15, START + STEADY_SECONDS, "model_name=holey")
    gaps = history.gaps()  # type: ignore[attr-defined]
    assert len(gaps) == 1
    # The steps at the hole's edges were scraped only in part: they belong to the gap.
    assert HOLE[1] - HOLE[0] <= gaps[0].seconds <= HOLE[1] - HOLE[0] + 30
    assert abs(gaps[0].start + 15 - HOLE[0]) <= 15
    known = [r for r in history.rates() if not math.isnan(r)]  # type: ignore[attr-defined]
    assert min(known) > 8


def test_one_command_from_a_prometheus_range_to_a_recommended_hpa(
    history_prometheus: Process, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`backtest --prometheus-url --start --end --selector` fits capacity from the range, judges the
    built-in sweep and writes the record, the plot and (when a candidate is supported) its manifests.
    On the real server's recorded traffic every kind of verdict occurs: the fixed fleet is supported,
    the queue-driven policies rejected, the rest open on the fitted capacity's uncertainty."""
    out = tmp_path / "out"
    code = cli.main(
        [
            "backtest",
            "--prometheus-url",
            history_prometheus.url,
            "--start",
            f"{START + 5:.0f}",
            "--end",
            f"{START + 255:.0f}",
            "--selector",
            "model_name=llama-1b-dummy",
            "--query-step",
            "5s",
            "--out",
            str(out),
            "--min-requests",
            "100",
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "fitted: median throughput per replica" in printed.out
    record = json.loads((out / "decision.json").read_text())
    assert 25 < record["calibration"]["capacity"]["value"] < 36  # the real server served ~29-33 req/s
    verdicts = {c["verdict"] for c in record["candidates"]}
    assert verdicts == {"supported", "rejected", "open", "reference"}
    assert (out / "pareto.png").read_bytes().startswith(b"\x89PNG")
    recommended = record["recommended"]
    assert (out / "hpa.yaml").exists() == bool(recommended and recommended["manifests"])


def test_a_steady_range_recommends_an_hpa_with_its_manifests(
    history_prometheus: Process, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a capacity given, a steady 10 req/s is served well by every candidate: the cheapest, an
    HPA, is recommended and its HorizontalPodAutoscaler and ScaledObject written."""
    out = tmp_path / "out"
    code = cli.main(
        [
            "backtest",
            "--prometheus-url",
            history_prometheus.url,
            "--start",
            f"{START + 15:.0f}",
            "--end",
            f"{START + STEADY_SECONDS:.0f}",
            "--selector",
            "model_name=steady",
            "--capacity",
            "30",
            "--out",
            str(out),
            "--namespace",
            "llm",
        ]
    )
    assert code == 0, capsys.readouterr().err
    record = json.loads((out / "decision.json").read_text())
    assert record["recommended"] is not None
    hpa = (out / "hpa.yaml").read_text()
    assert "kind: HorizontalPodAutoscaler" in hpa and "namespace: llm" in hpa and "model_name: steady" in hpa
    assert "kind: ScaledObject" in (out / "scaledobject.yaml").read_text()


@pytest.mark.parametrize(
    ("selector", "start", "end", "message"),
    [
        pytest.param("", START + 100, START, "is empty or inverted", id="inverted range"),
        pytest.param("", START, START, "is empty or inverted", id="empty range"),
        pytest.param(
            "",
            START - 86400,
            START - 80000,
            "has no vLLM series (vllm:num_requests_running) between",
            id="no vLLM series",
        ),
        pytest.param(
            "model_name=mistral",
            START,
            START + 600,
            "selector 'model_name=mistral' matches no vLLM series",
            id="selector matches nothing",
        ),
    ],
)
def test_bad_ranges_and_selectors_are_one_line_errors(
    history_prometheus: Process, selector: str, start: float, end: float, message: str
) -> None:
    with pytest.raises(PrometheusHistoryError) as raised:
        _read(history_prometheus.url, start, end, selector)
    text = str(raised.value)
    assert message in text and "\n" not in text
    if "matches no" in text:
        assert "llama-1b-dummy" in text and "steady" in text  # the models that are there


def test_an_unreachable_prometheus_is_named(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PrometheusHistoryError, match=f"unable to query prometheus {url}"):
        _read(url, START, START + 600, "")
