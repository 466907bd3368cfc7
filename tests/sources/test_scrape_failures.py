"""What failed pods mean for the scrape source (adapter/sources/scrape.py): a dead, slow, reset or
garbage-answering pod is a partial failure naming the pod and the precise cause, or (with
`on_partial: ignore-failed`) is left out of the value; it never holds up the others' answers.

The pods are real HTTP servers on loopback (tests/sources/scrape_fleet.py).
"""

from __future__ import annotations

import time

import pytest

from adapter.errors import PartialFailure, SourceUnavailable
from adapter.telemetry import Telemetry
from adapter.vocabulary import selectors
from tests.sources.scrape_fleet import (
    EVERYTHING,
    INTERVAL,
    TIMEOUT,
    Fleet,
    MakeSource,
    dead_url,
    metric,
    rounds,
)
from tests.vllm_pages import PodLoad

FAILURES = [
    pytest.param("dead", r"ClientConnectorError: Cannot connect to host 127\.0\.0\.1", id="dead pod"),
    pytest.param("slow", r"timed out after 0\.4s", id="slow pod"),
    pytest.param("reset", r"(ClientPayloadError|ServerDisconnectedError)", id="pod vanishes mid-body"),
    pytest.param("http-500", r"HTTP 500 Internal Server Error", id="http error"),
    pytest.param(
        "html", r"content type 'text/html' must be text/plain or application/openmetrics-text", id="html page"
    ),
    pytest.param(
        "html-as-text",
        r"unable to parse the exposition: page is not a Prometheus text exposition",
        id="html served as text",
    ),
    pytest.param(
        "malformed",
        r"unable to parse the exposition: line \d+: value "
        r"'lots' of vllm:num_requests_running must be a number",
        id="garbage line",
    ),
    pytest.param("not-utf8", r"unable to parse the exposition: not UTF-8", id="binary garbage"),
]


def break_pod(fleet: Fleet, behaviour: str) -> str:
    """A pod failing the way `behaviour` says; returns its URL."""
    if behaviour == "dead":
        return dead_url()
    url = fleet.add("bad", PodLoad("llama", waiting=100))
    fleet.pods["bad"].behaviour = "ok" if behaviour == "slow" else behaviour
    fleet.pods["bad"].delay = 5.0 if behaviour == "slow" else 0.0
    return url


@pytest.mark.parametrize(("behaviour", "cause"), FAILURES)
async def test_a_failed_pod_is_a_partial_failure(
    fleet: Fleet, make_source: MakeSource, behaviour: str, cause: str
) -> None:
    """With `on_partial: error` one failing pod makes the metric 503, naming the pod and the
    precise cause; the answer comes within an interval plus the per-pod timeout."""
    good = fleet.add("good", PodLoad("llama", waiting=1))
    bad = break_pod(fleet, behaviour)
    source = await make_source([good, bad])
    started = time.monotonic()
    with pytest.raises(
        PartialFailure,
        match=f"unable to scrape 1 of 2 targets of vllm_requests_waiting in namespace 'ml': {bad}: {cause}",
    ):
        await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)
    assert time.monotonic() - started < INTERVAL + TIMEOUT + 1.0


@pytest.mark.parametrize(("behaviour", "cause"), FAILURES)
async def test_ignore_failed_serves_the_pods_that_answered(
    fleet: Fleet, make_source: MakeSource, behaviour: str, cause: str
) -> None:
    """With `on_partial: ignore-failed` the value is computed over the pods that answered, and a
    slow or broken pod does not hold up the others' rounds."""
    good = fleet.add("good", PodLoad("llama", waiting=1))
    source = await make_source([good, break_pod(fleet, behaviour)], on_partial="ignore-failed")
    started = time.monotonic()
    sample = await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)
    assert (sample.value, sample.targets) == (1.0, 1)
    assert time.monotonic() - started < INTERVAL + TIMEOUT + 1.0
    assert time.time() - sample.timestamp < INTERVAL + TIMEOUT + 0.5


async def test_every_pod_failing_is_unavailable(make_source: MakeSource) -> None:
    """When no pod answered there is nothing to compute from, whatever the policy."""
    source = await make_source([dead_url(), dead_url()], on_partial="ignore-failed")
    with pytest.raises(
        SourceUnavailable, match="unable to scrape any of the 2 targets of vllm_requests_waiting"
    ):
        await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)


async def test_a_failed_pod_of_another_model_does_not_count(fleet: Fleet, make_source: MakeSource) -> None:
    """A pod whose last good scrape had no series matching the selector is irrelevant when it fails."""
    source = await make_source(
        [fleet.add("a", PodLoad("llama", waiting=2)), fleet.add("b", PodLoad("qwen", waiting=5))]
    )
    await rounds(source, 1)
    fleet.pods["b"].behaviour = "http-500"
    await rounds(source, 2)
    sample = await source.fetch(metric("vllm_requests_waiting"), "ml", selectors.parse("model_name=llama"))
    assert sample.value == 2.0
    with pytest.raises(PartialFailure):
        await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)


async def test_a_recovered_pod_counts_again(fleet: Fleet, make_source: MakeSource) -> None:
    """A failure lasts one round: the next good scrape brings the pod back."""
    source = await make_source(
        [fleet.add("a", PodLoad("llama", waiting=2)), fleet.add("b", PodLoad("llama", waiting=5))]
    )
    fleet.pods["b"].behaviour = "http-500"
    with pytest.raises(PartialFailure):
        await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)
    fleet.pods["b"].behaviour = "ok"
    await rounds(source, 2)
    assert (await source.fetch(metric("vllm_requests_waiting"), "ml", EVERYTHING)).value == 7.0


async def test_scrapes_are_recorded_in_telemetry(fleet: Fleet, make_source: MakeSource) -> None:
    """Every pod scrape is one observation of the adapter's upstream metrics, by outcome."""
    telemetry = Telemetry()
    slow = fleet.add("slow", PodLoad("llama"))
    fleet.pods["slow"].delay = 5.0
    source = await make_source([fleet.add("a", PodLoad("llama")), dead_url(), slow], telemetry=telemetry)
    await rounds(source, 2)
    value = telemetry.registry.get_sample_value
    labels = {"source": "scrape"}
    assert (
        value("vllm_autoscale_upstream_query_duration_seconds_count", {**labels, "outcome": "success"}) or 0
    ) >= 2
    assert (value("vllm_autoscale_upstream_errors_total", {**labels, "outcome": "error"}) or 0) >= 2
    assert (value("vllm_autoscale_upstream_errors_total", {**labels, "outcome": "timeout"}) or 0) >= 2
