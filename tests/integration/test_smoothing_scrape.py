"""A smoothed gauge through the scrape source over emulated vLLM replicas: the mean of the rounds in the
window.

Two emulated replicas (lab.emulator, in process, the fleet of test_scrape_replicas.py) under an
on-off load keep `vllm_requests_waiting` moving. One scrape source, built from a configuration with
`smoothing: 5s` as production builds it, is asked alternately for the gauge unsmoothed and smoothed:
the unsmoothed fetches on either side of a smoothed one say what that round's value was, so every
smoothed answer is checked against the mean the test computes from the rounds it was computed from.

On virtual time (`lab.virtual_time`), as test_scrape_replicas.py: the source reads the loop's clock, so
a loaded machine cannot delay a page past the scrape timeout (a failed round is a value this test
cannot check).
"""

from __future__ import annotations

import pytest

from adapter.app import make_source
from adapter.config import load_file
from adapter.sources import Sample
from adapter.sources.scrape import ScrapeSource
from adapter.telemetry import Telemetry
from adapter.vocabulary import catalogue, selectors
from lab import virtual_time
from tests.integration.test_scrape_replicas import busy_fleet
from tests.waiting import until

pytestmark = pytest.mark.integration

INTERVAL = 1.0
WINDOW = 5.0
ROUNDS = 14
METRIC = "vllm_requests_waiting"
EVERYTHING = selectors.parse("")


def test_the_served_value_is_the_mean_of_the_rounds_in_the_window() -> None:
    checked = virtual_time.run(_smoothed_rounds())
    recorded = sorted({served.timestamp for served, _ in checked})
    assert any(len(expected) >= WINDOW - 1 for _, expected in checked), "a full window was reached"
    assert len(recorded) > max(len(expected) for _, expected in checked), "old rounds left the window"
    assert any(s.value != expected[-1] for s, expected in checked), "the mean differed from the latest value"


async def _smoothed_rounds() -> list[tuple[Sample, list[float]]]:
    """Each smoothed answer of `ROUNDS` rounds, checked against its window, with the values it averaged."""
    async with busy_fleet() as urls:
        config = load_file(
            None,
            {
                "source": "scrape",
                "scrape.targets": urls,
                "scrape.namespace": "ml",
                "scrape.interval": INTERVAL,
                "scrape.timeout": 0.8,
                "metrics": {METRIC: {"smoothing": f"{WINDOW:g}s"}},
            },
        )
        (smooth,) = [m for m in config.catalogue() if m.name == METRIC]
        raw = catalogue.builtin(METRIC)
        assert smooth != raw
        source = make_source(config, Telemetry(), clock=virtual_time.loop_clock())
        assert isinstance(source, ScrapeSource)
        await source.start()
        try:
            values: dict[float, float] = {}  # round (sample time) -> its unsmoothed value
            recorded: list[float] = []  # the rounds the smoothed fetches were computed from
            checked: list[tuple[Sample, list[float]]] = []
            for _ in range(ROUNDS):
                target = source.rounds + 1
                await until(lambda: source.rounds >= target, 5 * INTERVAL, "the next scrape round")  # noqa: B023
                before = await source.fetch(raw, "ml", EVERYTHING)
                served = await source.fetch(smooth, "ml", EVERYTHING)
                after = await source.fetch(raw, "ml", EVERYTHING)
                for sample in (before, after):
                    assert sample.value is not None
                    values[sample.timestamp] = sample.value
                assert served.timestamp in (before.timestamp, after.timestamp), "rounds in between"
                if not recorded or recorded[-1] != served.timestamp:
                    recorded.append(served.timestamp)
                inside = [t for t in recorded if served.timestamp - WINDOW < t <= served.timestamp]
                expected = [values[t] for t in inside]
                assert served.value == pytest.approx(sum(expected) / len(expected)), (inside, expected)
                assert served.targets == 2
                checked.append((served, expected))
        finally:
            await source.close()
    return checked
