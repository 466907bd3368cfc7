"""Every dashboard query, run against a real Prometheus holding vLLM-shaped data under changing load.

Prometheus (started here on 127.0.0.1) scrapes, every second:
- three vLLM pods whose pages are derived from a real vLLM 0.26.0 exposition
  (`tests/data/metrics-overloaded.prom`, copied from shared/data/vllm-0.26.0/): counters and histograms
  advance between scrapes at a fixed fraction of the captured totals, running/waiting gauges move. Two pods
  serve the captured fast model (its TPOT histogram sits entirely in the first bucket, as measured); the third
  serves a second model with two data-parallel engines whose latency observations are moved one bucket up,
  like the 8B run of `vllm-metrics.md` §8, so its quantiles resolve. The 0.33 counter
  `vllm:admission_rejections_total` is added, as 0.26 predates it;
- three pods of a disaggregated model, one prefill and two decode, from the same capture, carrying the
  role label the chart's PodMonitor copies from `llm-d.ai/role` (`llm_d_ai_role`). A decode engine
  receives most of its prompt tokens through the KV connector (`vllm:prompt_tokens_by_source_total`,
  source `external_kv_transfer`; 5 % `local_compute`) and, as a KV-transfer consumer, exports
  `vllm:num_requests_kv_fetch_by_stage`; kube-state-metrics reports the model's `-prefill` and `-decode`
  Deployments;
- kube-state-metrics, DCGM exporter and CloudWatch (SQS) fixture pages;
- the adapter's own metrics, from a real `adapter.telemetry.Telemetry` registry exercised per scrape
(the pages are rendered by `tests.integration.exporter_pages`); and it evaluates the alerts' generated
recording rules (`alerts/vllm-autoscale.rules.yaml`).

The queries are read from the committed JSON (what Grafana would load), with the variables set as
Grafana would: All → `.*`, `$__rate_interval` → 5s (four 1 s scrapes plus one). Grafana itself cannot
run here; this checks that each query parses and returns data, and that the variables filter.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapter.telemetry import Telemetry
from adapter.vocabulary import exporters
from adapter.vocabulary.catalogue import BUILTIN
from alerts import disaggregated, recording
from alerts.params import Params
from dashboards import layout
from tests.dashboard_json import load
from tests.integration.exporter_pages import (
    ADAPTER_NAMESPACE,
    ADAPTER_POD,
    DECODE,
    FAST_MODEL,
    HPAS,
    KV_FETCHES,
    PD_MODEL,
    PD_NAME,
    PODS,
    SLOW_MODEL,
    adapter_page,
    dcgm_page,
    ksm_page,
    sqs_page,
    vllm_page,
)
from tests.integration.procs import ExpositionServer, Process, prometheus, wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RATE_INTERVAL = "5s"

RULES_FILE = ROOT / "alerts" / "vllm-autoscale.rules.yaml"
EPP_PAGE = (ROOT / "tests" / "data" / "llm-d-epp.metrics.txt").read_text(encoding="utf-8")
#: recorded over a day that ended an hour ago: no Prometheus a test starts can hold it yet
NEEDS_HISTORY = (recording.TPOT_BASELINE_RECORD,)

VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


# --- The running stack --------------------------------------------------------------------------


def query(url: str, promql: str) -> list[dict[str, Any]]:
    """An instant query's result; a query Prometheus rejects raises with its error message."""
    data = urllib.parse.urlencode({"query": promql}).encode()
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query", data=data, timeout=5) as response:
            document = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"Prometheus rejected {promql!r}: {exc.read().decode()}") from exc
    result: list[dict[str, Any]] = document["data"]["result"]
    return result


def label_values(url: str, label: str, selector: str) -> list[str]:
    now = time.time()
    params = urllib.parse.urlencode({"match[]": selector, "start": now - 300, "end": now})
    with urllib.request.urlopen(f"{url}/api/v1/label/{label}/values?{params}", timeout=5) as response:
        values: list[str] = json.loads(response.read())["data"]
    return values


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    server = ExpositionServer()
    try:
        started = time.monotonic()
        telemetry = Telemetry()
        vllm_targets = [
            {"targets": [f"127.0.0.1:{server.add(pod.name, vllm_page(pod))}"], "labels": pod.target_labels}
            for pod in PODS
        ]

        def job(
            name: str, port: int, *, honor: bool = False, labels: dict[str, str] | None = None
        ) -> dict[str, Any]:
            config: dict[str, Any] = {
                "job_name": name,
                "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": labels or {}}],
            }
            if honor:
                config["honor_labels"] = True  # as kube-state-metrics and dcgm-exporter are scraped
            return config

        scrape_configs = [
            {"job_name": "vllm", "static_configs": vllm_targets},
            job("kube-state-metrics", server.add("ksm", lambda: ksm_page(started)), honor=True),
            job("dcgm-exporter", server.add("dcgm", dcgm_page), honor=True),
            job("cloudwatch", server.add("sqs", sqs_page)),
            job(
                "vllm-autoscale",
                server.add("adapter", adapter_page(telemetry)),
                labels={"namespace": ADAPTER_NAMESPACE, "pod": ADAPTER_POD},
            ),
            # the inference gateway's endpoint picker (tests/data/llm-d-epp.metrics.txt, from llm-d's source)
            job("epp", server.add("epp", lambda: EPP_PAGE), labels={"namespace": "llm", "pod": "epp-0"}),
        ]
        targets = len(PODS) + 5
        workdir = tmp_path_factory.mktemp("prometheus")
        with prometheus(workdir, scrape_configs, rule_files=[RULES_FILE]) as process:
            # Four scrapes of every target: every 5 s rate window then holds at least two samples.
            def scraped_enough() -> bool:
                result = query(process.url, "count(count_over_time(up[1m]) >= 4)")
                return bool(result) and int(float(result[0]["value"][1])) == targets

            wait_for(scraped_enough, timeout=30, what="four scrapes of every target")
            yield process
    finally:
        server.close()


# --- Queries from the committed dashboards ------------------------------------------------------


ALL = {"namespace": ".*", "model": ".*", "pod": ".*", "hpa": ".*", "queue": ".*", "metric": ".*"}
# the autoscaling dashboard's text variables: the adapter's vllm_saturation parameters
ALL |= {"capacity": "48", "kv_target": "0.9", "queue_target": "4"}


def substitute(text: str, values: dict[str, str]) -> str:
    """Interpolate variables as Grafana does for a regex matcher; `$1` (label_replace) stays."""
    builtins = {"__rate_interval": RATE_INTERVAL, "__interval": "1s", "__range": "1m"}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name.isdigit():
            return match.group(0)
        mapping = values | builtins
        if name not in mapping:
            raise AssertionError(f"no value for variable {name!r} in {text!r}")
        return mapping[name]

    return VARIABLE.sub(replace, text)


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: str
    ref: str
    expr: str
    legend: str

    @property
    def id(self) -> str:
        return f"{self.dashboard.removesuffix('.json')}:{self.panel}:{self.ref}"


def dashboard_queries() -> list[PanelQuery]:
    found = []
    for board in layout.BOARDS:
        document = load(board.filename)
        for panel in document["panels"]:
            for t in panel.get("targets", []):
                found.append(
                    PanelQuery(board.filename, panel["title"], t["refId"], t["expr"], t["legendFormat"])
                )
        for note in document["annotations"]["list"]:
            if "expr" in note:
                found.append(PanelQuery(board.filename, f"annotation {note['name']}", "A", note["expr"], ""))
    return found


def dashboard_variables() -> list[tuple[str, str, str]]:
    return [
        (board.filename, variable["name"], variable["query"])
        for board in layout.BOARDS
        for variable in load(board.filename)["templating"]["list"]
        if variable["type"] == "query"
    ]


QUERIES = dashboard_queries()
VARIABLES = dashboard_variables()
#: queries that can return data in a Prometheus only seconds old
CURRENT = [q for q in QUERIES if not any(record in q.expr for record in NEEDS_HISTORY)]


def poll(url: str, promql: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Wait for data; a query Prometheus rejects fails at once rather than after the timeout."""
    return query(url, promql) or wait_for(
        lambda: query(url, promql), timeout=timeout, interval=0.25, what=f"data for {promql}"
    )


def test_the_dashboards_hold_enough_queries_to_matter() -> None:
    """Guard against a silently empty parametrisation: all five dashboards contribute queries."""
    assert {q.dashboard for q in QUERIES} == {b.filename for b in layout.BOARDS}
    assert len(QUERIES) > 80
    assert len(QUERIES) - len(CURRENT) == 1, "only the TPOT drift needs a day of history"


@pytest.mark.parametrize("panel_query", CURRENT, ids=[q.id for q in CURRENT])
def test_every_panel_query_parses_and_returns_data_without_engine(
    prom: Process, panel_query: PanelQuery
) -> None:
    """With every variable at All, each query returns at least one series, none keeping `engine`."""
    result = poll(prom.url, substitute(panel_query.expr, ALL))
    for series in result:
        assert "engine" not in series["metric"], (
            f"{panel_query.id} keeps the engine label: {series['metric']}"
        )


def defaults(filename: str) -> dict[str, str]:
    """Each variable of a dashboard at the value it opens with, as Grafana interpolates it: All is the
    variable's `allValue`, a text box its stored text."""
    values = {}
    for variable in load(filename)["templating"]["list"]:
        current = variable.get("current", {}).get("value")
        if variable["type"] == "datasource":
            continue
        if current in ("$__all", ["$__all"]):
            values[variable["name"]] = variable["allValue"]
        else:
            values[variable["name"]] = current if isinstance(current, str) else "|".join(current)
    return values


def test_every_query_parses_with_every_variable_at_its_default(prom: Process) -> None:
    """A dashboard opens valid: with every variable at its default (an empty text box included),
    Prometheus accepts every query of every panel, those without data yet too."""
    for panel_query in QUERIES:
        query(prom.url, substitute(panel_query.expr, defaults(panel_query.dashboard)))


def test_hpa_target_panels_match_our_hpas_and_kedas(prom: Process) -> None:
    """KEDA names its HPA's metric `s<trigger index>-<metric>`; a target panel shows the HPAs that
    name it either way (the fixture's second HPA is KEDA's)."""
    targets = [q for q in QUERIES if exporters.HPA_TARGET in q.expr]
    assert len(targets) == len(BUILTIN) + 2, (
        "one per catalogue metric, the saturation and the forecast panel's"
    )
    for panel_query in targets:
        result = poll(prom.url, substitute(panel_query.expr, ALL))
        assert {s["metric"][exporters.HPA_LABEL] for s in result} == {hpa for _, hpa in HPAS}, panel_query.id


@pytest.mark.parametrize(
    ("dashboard", "name", "definition"), VARIABLES, ids=[f"{d}:{n}" for d, n, _ in VARIABLES]
)
def test_every_variable_query_returns_values(
    prom: Process, dashboard: str, name: str, definition: str
) -> None:
    """Each `label_values(series, label)` yields the expected values through Prometheus' label API."""
    match = re.fullmatch(r"label_values\((.+), (\w+)\)", substitute(definition, ALL))
    assert match, definition
    values = set(wait_for(lambda: label_values(prom.url, match[2], match[1]), timeout=10, what=definition))
    expected = {
        "namespace": {"llm", "team-b"} if dashboard != layout.ADAPTER.filename else {ADAPTER_NAMESPACE},
        "model": {FAST_MODEL, SLOW_MODEL, PD_MODEL},
        "pod": {pod.name for pod in PODS} if dashboard != layout.ADAPTER.filename else {ADAPTER_POD},
        "hpa": {hpa for _, hpa in HPAS},
        "queue": {"inference-requests", "inference-requests-dlq"},
        "metric": {metric.name for metric in BUILTIN},
    }[name]
    assert values == expected


def test_variables_filter_every_vllm_query(prom: Process) -> None:
    """namespace=team-b and model=llama-8b leave only that model's pod in every labelled series."""
    selection = ALL | {"namespace": "team-b", "model": SLOW_MODEL}
    answered = 0
    for panel_query in QUERIES:
        if panel_query.dashboard not in {b.filename for b in layout.BOARDS if b.vllm_scoped}:
            continue
        if "kube_" in panel_query.expr or "aws_" in panel_query.expr:
            continue  # HPA, pod-phase and queue series are selected by their own variables
        result = query(prom.url, substitute(panel_query.expr, selection))
        answered += bool(result)
        for series in result:
            labels = series["metric"]
            assert labels.get("model_name", SLOW_MODEL) == SLOW_MODEL, (panel_query.id, labels)
            assert labels.get("pod", "vllm-8b-0") == "vllm-8b-0", (panel_query.id, labels)
    assert answered > 40


def _find(dashboard: layout.Board, title: str, legend_suffix: str) -> PanelQuery:
    (found,) = [
        q
        for q in QUERIES
        if q.dashboard == dashboard.filename and q.panel == title and q.legend.endswith(legend_suffix)
    ]
    return found


def test_tpot_quantiles_in_the_first_bucket_are_hidden_and_resolved_ones_shown(prom: Process) -> None:
    """The fast model's TPOT (all ≤ 10 ms) has a mean but no p90; the slow model's p90 lies in (10, 25] ms."""
    p90 = _find(layout.OVERVIEW, "Time per output token", "p90")
    mean = _find(layout.OVERVIEW, "Time per output token", "mean")
    fast = ALL | {"model": FAST_MODEL}
    assert poll(prom.url, substitute(mean.expr, fast))
    assert query(prom.url, substitute(p90.expr, fast)) == []
    (slow,) = poll(prom.url, substitute(p90.expr, ALL | {"model": SLOW_MODEL}))
    assert 0.01 < float(slow["value"][1]) <= 0.025


def test_pending_gpu_pods_count_only_pending_pods_that_request_a_gpu(prom: Process) -> None:
    """vllm-1b-2 (Pending, 1 GPU) counts; batch-cpu-0 (Pending, no GPU) and running pods do not."""
    panel = [q for q in QUERIES if q.panel == "Pending GPU pods"]
    pods = poll(prom.url, substitute(panel[0].expr, ALL))
    assert {s["metric"]["namespace"]: float(s["value"][1]) for s in pods} == {"llm": 1.0}
    (gpus,) = poll(prom.url, substitute(panel[1].expr, ALL))
    assert float(gpus["value"][1]) == 1.0


def test_gpu_panels_keep_only_vllm_gpus_labelled_with_their_model(prom: Process) -> None:
    """The unallocated GPU and the trainer's GPU are dropped; each vLLM GPU carries its model."""
    util = _find(layout.GPU, "GPU utilisation", "{{gpu}}")
    result = poll(prom.url, substitute(util.expr, ALL))
    seen = {(s["metric"]["pod"], s["metric"]["gpu"], s["metric"]["model_name"]) for s in result}
    assert seen == {
        ("vllm-1b-0", "0", FAST_MODEL),
        ("vllm-1b-1", "1", FAST_MODEL),
        ("vllm-8b-0", "0", SLOW_MODEL),
        ("vllm-8b-0", "1", SLOW_MODEL),
    }


def test_throttle_reasons_decode_bits_of_both_field_names(prom: Process) -> None:
    """0x44 on one GPU (new name) and 0x8 on another (old name): one GPU each for SW power cap, HW
    thermal and HW slowdown, none for the rest; the trainer's GPU (0x4) is not a vLLM GPU."""
    counts = {}
    for bit, reason in exporters.THROTTLE_BITS:
        panel_query = _find(layout.GPU, "Throttled GPUs by reason", reason)
        (series,) = poll(prom.url, substitute(panel_query.expr, ALL))
        counts[bit] = float(series["value"][1])
    assert counts == {0x4: 1.0, 0x8: 1.0, 0x20: 0.0, 0x40: 1.0, 0x80: 0.0}


def test_tpot_drift_reads_the_alerts_recording_rules(prom: Process) -> None:
    """The drift panel parses and divides two rules Prometheus evaluates; the recent one has data per model.

    The baseline (a day ending an hour ago) cannot exist yet, so its data is not asserted here.
    """
    (drift,) = [q for q in QUERIES if q.panel == "TPOT against its baseline"]
    assert query(prom.url, substitute(drift.expr, ALL)) == []  # parses; no baseline yet
    with urllib.request.urlopen(f"{prom.url}/api/v1/rules?type=record", timeout=5) as response:
        groups = json.loads(response.read())["data"]["groups"]
    loaded = {rule["name"] for group in groups for rule in group["rules"]}
    assert {recording.TPOT_RECORD, recording.TPOT_BASELINE_RECORD} <= loaded
    assert recording.TPOT_RECORD in drift.expr and recording.TPOT_BASELINE_RECORD in drift.expr
    recent = poll(prom.url, f'{recording.TPOT_RECORD}{{model_name=~".*"}}')
    assert {s["metric"]["model_name"] for s in recent} == {FAST_MODEL, SLOW_MODEL, PD_MODEL}


def test_queue_panels_read_the_alerts_recorded_depths_upstream_and_dlq_apart(prom: Process) -> None:
    """The queue panel shows the upstream queue only and the DLQ panel the dead-letter queue only, from
    the recording rules the queue alerts compare (so a `queue_depth_expr` override reaches both)."""
    upstream = _find(layout.AUTOSCALING, "Queue depth", "{{queue_name}}")
    dlq = _find(layout.AUTOSCALING, "Dead-letter queue depth", "{{queue_name}}")
    assert recording.QUEUE_RECORD in upstream.expr and recording.DLQ_RECORD in dlq.expr
    depths = {}
    for panel_query in (upstream, dlq):
        for series in poll(prom.url, substitute(panel_query.expr, ALL)):
            depths[(panel_query.panel, series["metric"]["queue_name"])] = float(series["value"][1])
    assert depths == {
        ("Queue depth", "inference-requests"): 340.0,
        ("Dead-letter queue depth", "inference-requests-dlq"): 12.0,
    }


def test_prefill_decode_panels_read_the_disaggregated_model_only(prom: Process) -> None:
    """Every P/D panel shows the disaggregated model alone (aggregated pods carry no role label): one
    ready prefill pod to two decode pods, each decode pod's fetches by stage, both alerts' recorded
    estimates (loaded from the rules file), and a recomputed share under the hand-over alert's threshold."""
    board = [q for q in QUERIES if q.dashboard == layout.DISAGGREGATED.filename]
    for panel_query in board:
        for series in poll(prom.url, substitute(panel_query.expr, ALL)):
            labels = series["metric"]
            assert labels.get("model_name", PD_MODEL) == PD_MODEL, (panel_query.id, labels)
            assert labels.get("pool", PD_NAME) == PD_NAME, (panel_query.id, labels)
    (ratio,) = poll(prom.url, substitute(_find(layout.DISAGGREGATED, "P:D ratio", "P:D").expr, ALL))
    assert float(ratio["value"][1]) == 0.5
    fetches = poll(
        prom.url, substitute(_find(layout.DISAGGREGATED, "KV fetches in flight on decode", "").expr, ALL)
    )
    decode_pods = sum(pod.role == DECODE for pod in PODS)
    assert {s["metric"]["stage"]: float(s["value"][1]) for s in fetches} == {
        stage: value * decode_pods for stage, value in KV_FETCHES.items()
    }
    (share,) = poll(prom.url, disaggregated.DECODE_RECOMPUTE_SHARE_RECORD)
    assert 0 < float(share["value"][1]) < Params().kv_recompute_share_threshold
    (backlog,) = poll(prom.url, disaggregated.PREFILL_BACKLOG_RECORD)
    assert backlog["metric"]["model_name"] == PD_MODEL
