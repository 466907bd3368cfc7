"""A real page, end to end: vLLM and DLQ exporter pages → Prometheus with the generated rules →
Alertmanager with the example routing → webhook receivers standing in for the pager and the ticket queue.

The vLLM pod serves the real vLLM 0.26.0 capture (`metrics-idle.prom`) with its TPOT histogram and
request counter advanced in real time. The TPOT baseline (a day, excluding the last hour) cannot be
lived through in a test, so a day of history is backfilled into Prometheus's TSDB with
`promtool tsdb create-blocks-from openmetrics` before it starts; the rules keep their production
windows, and only their `for:` durations are shortened through `Params`.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapter.vocabulary.exporters import SQS_VISIBLE
from alerts import generate, recording
from alerts.contract import RUNBOOK_URL
from alerts.params import Params
from tests.integration.alerting_harness import BASELINE_RPS, BASELINE_TPOT, Receiver, VLLMPod, backfill
from tests.integration.procs import ExpositionServer, alertmanager, prometheus, prometheus_query, wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent.parent / "data" / "metrics-idle.prom"
MODEL = "llama-1b-dummy"  # the served model name in the capture
NAMESPACE = "serving"
VLLM_JOB = f"{NAMESPACE}/vllm-autoscale-vllm"  # the job name the chart's PodMonitor gives its targets
DLQ_METRIC = SQS_VISIBLE
SLOW_TPOT = 0.1  # 5x the baseline: over the 2x page ratio
# `for:` long enough to be a real hold (several 1 s evaluations), short enough for a test.
SHORT_FOR = "3s"
RUNBOOK = f"{RUNBOOK_URL}#"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def pods() -> Iterator[ExpositionServer]:
    server = ExpositionServer()
    try:
        yield server
    finally:
        server.close()


def am_alerts(url: str, *filters: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode([("filter", f) for f in filters])
    with urllib.request.urlopen(f"{url}/api/v2/alerts?{query}", timeout=5) as response:
        alerts: list[dict[str, Any]] = json.loads(response.read())
    return alerts


def value(url: str, promql: str) -> float | None:
    result = prometheus_query(url, promql)
    return float(result[0]["value"][1]) if result else None


def test_dlq_and_tpot_drift_page_through_alertmanager_and_resolve(
    tmp_path: Path, pods: ExpositionServer, receiver: Receiver
) -> None:
    """A DLQ over 10 and a TPOT at 5x its baseline page the pager with the alerts' labels and
    annotations; the TPOT ticket is inhibited while its model pages, a model-less ticket (DLQ growing)
    still reaches the ticket queue; once the DLQ drains and TPOT recovers the pager gets the resolution."""
    started = time.monotonic()
    dlq = {"depth": 0.0}
    cloudwatch_port = pods.add(
        "cloudwatch",
        lambda: (
            f'# TYPE {DLQ_METRIC} gauge\n{DLQ_METRIC}{{queue_name="orders-dlq"}} {dlq["depth"]!r}\n'
            f'{DLQ_METRIC}{{queue_name="orders"}} 3.0\n'
        ),
    )
    vllm_pod: dict[str, VLLMPod] = {}
    vllm_port = pods.add("vllm-0", lambda: vllm_pod["pod"].page())
    instance = f"127.0.0.1:{vllm_port}"

    # A day of TPOT history at the baseline, with exactly the labels the scrape below will attach.
    series_labels = (
        f'engine="0",model_name="{MODEL}",job="{VLLM_JOB}",instance="{instance}",'
        f'namespace="{NAMESPACE}",pod="vllm-0"'
    )
    count, total = backfill(tmp_path / "prometheus" / "data", series_labels, time.time())
    vllm_pod["pod"] = VLLMPod(FIXTURE.read_text(), count, total)

    rules = tmp_path / "rules.yaml"
    rules.write_text(
        generate.render_rules(Params(tpot_for=SHORT_FOR, dlq_depth_for=SHORT_FOR, dlq_growth_for=SHORT_FOR))
    )
    am_config = yaml.safe_load((ROOT / "alerts" / "alertmanager.example.yaml").read_text())
    am_config["global"] = {"resolve_timeout": "5s"}
    am_config["route"].update(group_wait="1s", group_interval="1s", repeat_interval="1h")
    for r in am_config["receivers"]:
        r["webhook_configs"][0]["url"] = f"{receiver.url}/{r['name']}"
    scrape_configs = [
        {
            "job_name": VLLM_JOB,
            "static_configs": [{"targets": [instance], "labels": {"namespace": NAMESPACE, "pod": "vllm-0"}}],
        },
        {
            "job_name": "cloudwatch-exporter",
            "static_configs": [
                {"targets": [f"127.0.0.1:{cloudwatch_port}"], "labels": {"namespace": NAMESPACE}}
            ],
        },
    ]

    with (
        alertmanager(tmp_path / "alertmanager", am_config) as am,
        prometheus(
            tmp_path / "prometheus", scrape_configs, rule_files=[rules], alertmanager_url=am.url
        ) as prom,
    ):
        # Before: the backfilled baseline is loaded, the live TPOT equals it, and nothing alerts.
        model = f'{{namespace="{NAMESPACE}", model_name="{MODEL}"}}'
        ratio = f"{recording.TPOT_RECORD}{model} / {recording.TPOT_BASELINE_RECORD}{model}"
        settled = wait_for(
            lambda: value(prom.url, ratio), timeout=30, what="the TPOT ratio from live and backfilled data"
        )
        assert settled == pytest.approx(1.0, rel=0.01)
        assert value(prom.url, f"{recording.TPOT_BASELINE_RECORD}{model}") == pytest.approx(BASELINE_TPOT)
        assert prometheus_query(prom.url, 'ALERTS{alertname=~"VLLMTPOTDrift|VLLMDeadLetterQueue.*"}') == []

        # Push the DLQ over 10 and slow TPOT to 5x (a burst first, so that the ticket and the page ratios
        # are crossed in the same evaluation).
        dlq["depth"] = 15.0
        vllm_pod["pod"].set_load(rps=4 * BASELINE_RPS, tpot=SLOW_TPOT, burst=1000)
        pushed = time.monotonic()

        def paged() -> dict[str, dict[str, Any]] | None:
            firing = {a["labels"]["alertname"]: a for a in receiver.alerts("/pager", "firing")}
            return firing if {"VLLMDeadLetterQueueDepthHigh", "VLLMTPOTDrift"} <= set(firing) else None

        pages = wait_for(paged, timeout=45, interval=0.2, what="both pages at the pager")
        page_seconds = time.monotonic() - pushed

        dlq_page = pages["VLLMDeadLetterQueueDepthHigh"]
        assert dlq_page["labels"] == {
            "alertname": "VLLMDeadLetterQueueDepthHigh",
            "severity": "page",
            "namespace": NAMESPACE,
            "queue_name": "orders-dlq",
            "job": "cloudwatch-exporter",
            "instance": f"127.0.0.1:{cloudwatch_port}",
        }
        assert dlq_page["annotations"] == {
            "summary": "A dead-letter queue holds requests that failed for good.",
            "description": (
                f"Dead-letter queue orders-dlq (namespace {NAMESPACE}) holds 15 messages (threshold 10) "
                f"for {SHORT_FOR}."
            ),
            "runbook_url": RUNBOOK + "vllmdeadletterqueuedepthhigh",
        }
        tpot_page = pages["VLLMTPOTDrift"]
        assert tpot_page["labels"] == {
            "alertname": "VLLMTPOTDrift",
            "severity": "page",
            "namespace": NAMESPACE,
            "model_name": MODEL,
        }
        assert tpot_page["annotations"]["runbook_url"] == RUNBOOK + "vllmtpotdrift"
        assert (
            tpot_page["annotations"]["summary"]
            == "Time per output token of a vLLM model has drifted above its own baseline."
        )
        description = re.fullmatch(
            rf"Mean TPOT of model {MODEL} in namespace {NAMESPACE} "
            r"over the last 10 minutes is (\d+\.\d\d)× its "
            r"baseline \(its mean over the previous day, "
            r"excluding the last hour\); the page threshold is 2×\.",
            tpot_page["annotations"]["description"],
        )
        assert description and float(description.group(1)) > 2, tpot_page["annotations"]["description"]

        # The TPOT ticket of the paging model is held back; a ticket without a model is delivered.
        wait_for(
            lambda: any(
                a["status"]["state"] == "suppressed" and a["status"]["inhibitedBy"]
                for a in am_alerts(am.url, 'alertname="VLLMTPOTDrift"', 'severity="ticket"')
            ),
            timeout=15,
            what="the TPOT ticket inhibited by its page",
        )
        ticket = wait_for(
            lambda: [
                a
                for a in receiver.alerts("/ticket", "firing")
                if a["labels"]["alertname"] == "VLLMDeadLetterQueueGrowing"
            ],
            timeout=15,
            what="the DLQ-growing ticket at the ticket receiver",
        )[0]
        assert ticket["labels"]["severity"] == "ticket" and ticket["labels"]["queue_name"] == "orders-dlq"

        # Resolve: the DLQ drains and a burst of fast requests brings the 10-minute mean back down.
        dlq["depth"] = 0.0
        vllm_pod["pod"].set_load(rps=BASELINE_RPS, tpot=BASELINE_TPOT, burst=200_000)
        resolving = time.monotonic()

        def resolved() -> set[str] | None:
            names = {a["labels"]["alertname"] for a in receiver.alerts("/pager", "resolved")}
            return names if {"VLLMDeadLetterQueueDepthHigh", "VLLMTPOTDrift"} <= names else None

        wait_for(resolved, timeout=45, interval=0.2, what="both resolutions at the pager")
        resolve_seconds = time.monotonic() - resolving

    # Only what was provoked paged, and the inhibited ticket never reached the ticket queue.
    assert {a["labels"]["alertname"] for a in receiver.alerts("/pager", "firing")} == {
        "VLLMDeadLetterQueueDepthHigh",
        "VLLMTPOTDrift",
    }
    assert all(a["labels"]["severity"] == "page" for a in receiver.alerts("/pager", "firing"))
    assert not [
        a for a in receiver.alerts("/ticket", "firing") if a["labels"]["alertname"] == "VLLMTPOTDrift"
    ]
    print(
        f"paged {page_seconds:.1f}s after the push, resolved {resolve_seconds:.1f}s after recovery, "
        f"{time.monotonic() - started:.1f}s in all"
    )
