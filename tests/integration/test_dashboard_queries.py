"""Every dashboard query, run against a real Prometheus holding vLLM-shaped data under changing load.

Prometheus (started here on 127.0.0.1) scrapes, every second:
- three vLLM pods whose pages are derived from a real vLLM 0.26.0 exposition
  (`tests/data/metrics-overloaded.prom`, copied from shared/data/vllm-0.26.0/): counters and histograms advance between
  scrapes at a fixed fraction of the captured totals, running/waiting gauges move. Two pods serve the
  captured fast model (its TPOT histogram sits entirely in the first bucket, as measured); the third
  serves a second model with two data-parallel engines whose latency observations are moved one
  bucket up, like the 8B run of `vllm-metrics.md` §8, so its quantiles resolve. The 0.33 counter
  `vllm:admission_rejections_total` is added, as 0.26 predates it;
- kube-state-metrics, DCGM exporter and CloudWatch (SQS) fixture pages;
- the adapter's own metrics, from a real `adapter.telemetry.Telemetry` registry exercised per scrape;
and it evaluates the alerts' generated recording rules (`alerts/vllm-autoscale.rules.yaml`).

The queries are read from the committed JSON (what Grafana would load), with the variables set as
Grafana would: All → `.*`, `$__rate_interval` → 5s (four 1 s scrapes plus one). Grafana itself cannot
run here; this checks that each query parses and returns data, and that the variables filter.
"""

from __future__ import annotations

import itertools
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from adapter import vllm
from adapter.catalogue import BUILTIN
from adapter.telemetry import Telemetry
from alerts import recording
from dashboards import panels, queries
from tests.integration.procs import ExpositionServer, Process, prometheus, wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "metrics-overloaded.prom"
FAST_MODEL = "llama-1b-dummy"  # the captured server's served name
SLOW_MODEL = "llama-8b"
#: counters grow by this fraction of the captured totals per second (~80 finished requests/s per pod)
GROWTH = 0.02
RATE_INTERVAL = "5s"
#: histograms whose observations the slow model shifts one bucket up
SHIFTED = {h.family[0] for h in (queries.TTFT, queries.TPOT, queries.ITL, queries.E2E, queries.QUEUE_TIME)}

RULES_FILE = ROOT / "alerts" / "vllm-autoscale.rules.yaml"
#: recorded over a day that ended an hour ago: no Prometheus a test starts can hold it yet
NEEDS_HISTORY = (recording.TPOT_BASELINE_RECORD,)

SAMPLE = re.compile(r"^(?P<name>[^{\s]+)(?P<labels>\{.*\})?\s+(?P<value>\S+)$")
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    model: str
    slow: bool = False
    engines: int = 1


PODS = (
    Pod("llm", "vllm-1b-0", FAST_MODEL),
    Pod("llm", "vllm-1b-1", FAST_MODEL),
    Pod("team-b", "vllm-8b-0", SLOW_MODEL, slow=True, engines=2),
)
ADAPTER_NAMESPACE, ADAPTER_POD = "vllm-autoscale", "vllm-autoscale-adapter-6b9d7-x2k4p"


# --- vLLM pages derived from the real capture ---------------------------------------------------


@dataclass
class Sample:
    name: str
    labels: str
    value: float
    kind: str  # "grow" (counters, histograms), "load" (running/waiting) or "const"


def _shift_up(samples: list[Sample]) -> None:
    """Move every observation of one histogram series one bucket up (the +Inf total unchanged)."""
    finite = [s for s in samples if 'le="+Inf"' not in s.labels]
    for lower, upper in reversed(list(itertools.pairwise(finite))):
        upper.value = lower.value
    finite[0].value = 0.0


def parse_capture(model: str, slow: bool, engines: int) -> list[str | Sample]:
    """The captured page as comment lines and samples, renamed, shifted and per engine as asked."""
    out: list[str | Sample] = []
    family_type = ""
    buckets: dict[str, list[Sample]] = {}
    for line in FIXTURE.read_text().splitlines():
        if line.startswith("#"):
            if line.startswith("# TYPE"):
                family_type = line.split()[3]
            out.append(line)
            continue
        match = SAMPLE.match(line)
        if not match:
            continue
        name, labels, value = match["name"], match["labels"] or "", float(match["value"])
        labels = labels.replace(f'model_name="{FAST_MODEL}"', f'model_name="{model}"')
        counter = family_type == "counter" and name.endswith("_total")
        histogram = family_type in ("histogram", "summary") and name.endswith(("_bucket", "_sum", "_count"))
        if counter or histogram:
            kind = "grow"
        elif name in (vllm.NUM_REQUESTS_RUNNING[0], vllm.NUM_REQUESTS_WAITING[0]):
            kind = "load"
        else:
            kind = "const"
        copies = [labels] + [
            labels.replace('engine="0"', f'engine="{e}"') for e in range(1, engines) if 'engine="0"' in labels
        ]
        for copy in copies:
            sample = Sample(name, copy, value, kind)
            out.append(sample)
            family = name.removesuffix("_bucket")
            if slow and name.endswith("_bucket") and family in SHIFTED:
                buckets.setdefault(family + re.sub(r',?le="[^"]*"', "", copy), []).append(sample)
            if slow and name.endswith("_sum") and name.removesuffix("_sum") in SHIFTED:
                sample.value *= 2.5  # observations one bucket up are roughly 2.5x larger
    for series in buckets.values():
        _shift_up(series)
    out.append(
        "# HELP vllm:admission_rejections_total Number of admission attempts rejected by a queue limit, by reason."
    )
    out.append("# TYPE vllm:admission_rejections_total counter")
    for reason in ("max_num_queued_reqs", "max_num_queued_tokens"):
        out.append(
            Sample(
                "vllm:admission_rejections_total", f'{{model_name="{model}",reason="{reason}"}}', 50.0, "grow"
            )
        )
    return out


def vllm_page(pod: Pod) -> Callable[[], str]:
    lines = parse_capture(pod.model, pod.slow, pod.engines)
    started = time.monotonic()

    def render() -> str:
        elapsed = time.monotonic() - started
        load = 0.6 + 0.2 * (int(elapsed) % 4)
        text = []
        for line in lines:
            if isinstance(line, str):
                text.append(line)
                continue
            factor = {"grow": 1 + GROWTH * elapsed, "load": load, "const": 1.0}[line.kind]
            text.append(f"{line.name}{line.labels} {line.value * factor!r}")
        return "\n".join(text) + "\n"

    return render


# --- Fixture exporters --------------------------------------------------------------------------


def exposition(families: dict[str, list[tuple[dict[str, str], float]]]) -> str:
    lines = []
    for name, samples in families.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            rendered = ",".join(f'{k}="{v}"' for k, v in labels.items())
            lines.append(f"{name}{{{rendered}}} {value!r}")
    return "\n".join(lines) + "\n"


HPAS = (("llm", "vllm-1b"), ("team-b", "vllm-8b"))
#: (namespace, pod, phase, GPUs requested)
KSM_PODS = (
    ("llm", "vllm-1b-0", "Running", 1),
    ("llm", "vllm-1b-1", "Running", 1),
    ("llm", "vllm-1b-2", "Pending", 1),
    ("llm", "batch-cpu-0", "Pending", 0),
    ("team-b", "vllm-8b-0", "Running", 2),
)
TARGET_VALUES = {"requests": ("average", 24.0), "ratio": ("value", 0.8), "seconds": ("value", 0.5)}


def ksm_page(started: float) -> str:
    desired = 2 + int((time.monotonic() - started) / 2) % 2
    families: dict[str, list[tuple[dict[str, str], float]]] = {name: [] for name in (
        queries.HPA_INFO, queries.HPA_TARGET, queries.HPA_DESIRED, queries.HPA_CURRENT, queries.HPA_MIN,
        queries.HPA_MAX, queries.DEPLOYMENT_READY, queries.POD_PHASE, queries.POD_REQUESTS,
    )}  # fmt: skip
    for namespace, hpa in HPAS:
        ref = {"namespace": namespace, "horizontalpodautoscaler": hpa}
        families[queries.HPA_INFO].append(
            (
                {
                    **ref,
                    "scaletargetref_api_version": "apps/v1",
                    "scaletargetref_kind": "Deployment",
                    "scaletargetref_name": hpa,
                },
                1.0,
            )
        )
        for metric in BUILTIN:
            target_type, value = TARGET_VALUES[metric.unit]
            families[queries.HPA_TARGET].append(
                ({**ref, "metric_name": metric.name, "metric_target_type": target_type}, value)
            )
        families[queries.HPA_DESIRED].append((ref, float(desired)))
        families[queries.HPA_CURRENT].append((ref, 2.0))
        families[queries.HPA_MIN].append((ref, 1.0))
        families[queries.HPA_MAX].append((ref, 8.0))
        families[queries.DEPLOYMENT_READY].append(({"namespace": namespace, "deployment": hpa}, 2.0))
    for namespace, pod, phase, gpus in KSM_PODS:
        ids = {"namespace": namespace, "pod": pod, "uid": f"uid-{pod}"}
        for candidate in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            families[queries.POD_PHASE].append(({**ids, "phase": candidate}, float(candidate == phase)))
        container = {**ids, "container": "main", "node": "gpu-node-a"}
        families[queries.POD_REQUESTS].append(({**container, "resource": "cpu", "unit": "core"}, 4.0))
        if gpus:
            families[queries.POD_REQUESTS].append(
                ({**container, "resource": queries.GPU_RESOURCE, "unit": "integer"}, float(gpus))
            )
    return exposition(families)


#: (host, gpu, namespace, pod, clock-event bitmask, exposed under the pre-DCGM-3.3 name)
GPUS = (
    ("gpu-node-a", "0", "llm", "vllm-1b-0", 0x4 | 0x40, False),
    ("gpu-node-a", "1", "llm", "vllm-1b-1", 0x8, True),
    ("gpu-node-b", "0", "team-b", "vllm-8b-0", 0x1, False),
    ("gpu-node-b", "1", "team-b", "vllm-8b-0", 0x0, False),
    ("gpu-node-b", "2", "", "", 0x0, False),  # unallocated: the exporter maps it to no pod
    ("gpu-node-b", "3", "llm", "trainer-0", 0x4, False),  # not a vLLM pod
)


def dcgm_page() -> str:
    families: dict[str, list[tuple[dict[str, str], float]]] = {}
    for host, gpu, namespace, pod, reasons, old_name in GPUS:
        labels = {
            "gpu": gpu,
            "UUID": f"GPU-{host}-{gpu}",
            "device": f"nvidia{gpu}",
            "modelName": "NVIDIA H200",
            "Hostname": host,
        }
        if pod:
            labels |= {"namespace": namespace, "pod": pod, "container": "main"}
        fields = {
            queries.GPU_UTIL[0]: 96.0, queries.FB_USED[0]: 130_000.0, queries.FB_FREE[0]: 10_000.0,
            queries.GPU_TEMP[0]: 71.0, queries.POWER[0]: 612.5, queries.XID[0]: 0.0,
            queries.THROTTLE_REASONS[0 if old_name else 1]: float(reasons),
        }  # fmt: skip
        for name, value in fields.items():
            families.setdefault(name, []).append((labels, value))
    return exposition(families)


#: the CloudWatch exporter's SQS depth, as the alerts' default queue expressions read it
SQS_VISIBLE = "aws_sqs_approximate_number_of_messages_visible_average"


def sqs_page() -> str:
    return exposition({
        SQS_VISIBLE: [({"queue_name": "inference-requests"}, 340.0), ({"queue_name": "inference-requests-dlq"}, 12.0)]
    })  # fmt: skip


def adapter_page(telemetry: Telemetry) -> Callable[[], str]:
    """The adapter's real registry, advanced as if it had served a round of HPA requests per scrape."""

    telemetry.held_sample_age.source = lambda: [(metric.name, 12.0) for metric in BUILTIN]

    def render() -> str:
        for metric in BUILTIN:
            telemetry.requests.labels(metric.name, "200").inc(4)
            telemetry.requests.labels(metric.name, "503").inc()
            telemetry.request_seconds.labels(metric.name).observe(0.0008)
            telemetry.errors.labels(metric.name, "stale").inc()
            telemetry.sample_age.labels(metric.name).observe(12.0)
        telemetry.observe_upstream("prometheus", "success", 0.02)
        telemetry.observe_upstream("prometheus", "timeout", 5.0)
        telemetry.grpc_calls.labels("GetMetrics", "OK").inc(4)
        telemetry.grpc_calls.labels("IsActive", "UNAVAILABLE").inc()
        telemetry.grpc_seconds.labels("GetMetrics").observe(0.0009)
        telemetry.cache_hits.inc(20)
        telemetry.cache_misses.inc()
        telemetry.cache_keys.set(len(BUILTIN))
        telemetry.ready.set(1)
        return generate_latest(telemetry.registry).decode()

    return render


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
            {"targets": [f"127.0.0.1:{server.add(pod.name, vllm_page(pod))}"],
             "labels": {"namespace": pod.namespace, "pod": pod.name, "container": "vllm"}}
            for pod in PODS
        ]  # fmt: skip

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
            job("vllm-autoscale", server.add("adapter", adapter_page(telemetry)),
                labels={"namespace": ADAPTER_NAMESPACE, "pod": ADAPTER_POD}),
        ]  # fmt: skip
        targets = len(PODS) + 4
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
    for board in panels.BOARDS:
        document = json.loads((ROOT / "dashboards" / board.filename).read_text())
        for panel in document["panels"]:
            for target in panel.get("targets", []):
                found.append(
                    PanelQuery(
                        board.filename,
                        panel["title"],
                        target["refId"],
                        target["expr"],
                        target["legendFormat"],
                    )
                )
        for annotation in document["annotations"]["list"]:
            if "expr" in annotation:
                found.append(
                    PanelQuery(
                        board.filename, f"annotation {annotation['name']}", "A", annotation["expr"], ""
                    )
                )
    return found


def dashboard_variables() -> list[tuple[str, str, str]]:
    found = []
    for board in panels.BOARDS:
        document = json.loads((ROOT / "dashboards" / board.filename).read_text())
        for variable in document["templating"]["list"]:
            if variable["type"] == "query":
                found.append((board.filename, variable["name"], variable["query"]))
    return found


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
    assert {q.dashboard for q in QUERIES} == {b.filename for b in panels.BOARDS}
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
        "namespace": {"llm", "team-b"} if dashboard != panels.ADAPTER.filename else {ADAPTER_NAMESPACE},
        "model": {FAST_MODEL, SLOW_MODEL},
        "pod": {pod.name for pod in PODS} if dashboard != panels.ADAPTER.filename else {ADAPTER_POD},
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
        if panel_query.dashboard not in {b.filename for b in panels.BOARDS if b.vllm_scoped}:
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


def _find(dashboard: panels.Board, title: str, legend_suffix: str) -> PanelQuery:
    (found,) = [
        q
        for q in QUERIES
        if q.dashboard == dashboard.filename and q.panel == title and q.legend.endswith(legend_suffix)
    ]
    return found


def test_tpot_quantiles_in_the_first_bucket_are_hidden_and_resolved_ones_shown(prom: Process) -> None:
    """The fast model's TPOT (all ≤ 10 ms) has a mean but no p90; the slow model's p90 lies in (10, 25] ms."""
    p90 = _find(panels.OVERVIEW, "Time per output token", "p90")
    mean = _find(panels.OVERVIEW, "Time per output token", "mean")
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
    util = _find(panels.GPU, "GPU utilisation", "{{gpu}}")
    result = poll(prom.url, substitute(util.expr, ALL))
    seen = {(s["metric"]["pod"], s["metric"]["gpu"], s["metric"]["model_name"]) for s in result}
    assert seen == {("vllm-1b-0", "0", FAST_MODEL), ("vllm-1b-1", "1", FAST_MODEL),
                    ("vllm-8b-0", "0", SLOW_MODEL), ("vllm-8b-0", "1", SLOW_MODEL)}  # fmt: skip


def test_throttle_reasons_decode_bits_of_both_field_names(prom: Process) -> None:
    """0x44 on one GPU (new name) and 0x8 on another (old name): one GPU each for SW power cap, HW
    thermal and HW slowdown, none for the rest; the trainer's GPU (0x4) is not a vLLM GPU."""
    counts = {}
    for bit, reason in queries.THROTTLE_BITS:
        panel_query = _find(panels.GPU, "Throttled GPUs by reason", reason)
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
    assert {s["metric"]["model_name"] for s in recent} == {FAST_MODEL, SLOW_MODEL}


def test_queue_panels_read_the_alerts_recorded_depths_upstream_and_dlq_apart(prom: Process) -> None:
    """The queue panel shows the upstream queue only and the DLQ panel the dead-letter queue only, from
    the recording rules the queue alerts compare (so a `queue_depth_expr` override reaches both)."""
    upstream = _find(panels.AUTOSCALING, "Queue depth", "{{queue_name}}")
    dlq = _find(panels.AUTOSCALING, "Dead-letter queue depth", "{{queue_name}}")
    assert recording.QUEUE_RECORD in upstream.expr and recording.DLQ_RECORD in dlq.expr
    depths = {}
    for panel_query in (upstream, dlq):
        for series in poll(prom.url, substitute(panel_query.expr, ALL)):
            depths[(panel_query.panel, series["metric"]["queue_name"])] = float(series["value"][1])
    assert depths == {
        ("Queue depth", "inference-requests"): 340.0,
        ("Dead-letter queue depth", "inference-requests-dlq"): 12.0,
    }
