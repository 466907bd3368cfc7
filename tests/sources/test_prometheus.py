"""The Prometheus source's answers: value, target count, sample time and gauge gaps read from one
combined query, evaluated at an instant aligned to the refresh interval.

The Prometheus HTTP API is faked (tests/sources/prometheus_fake.py, the `prom` fixture) so every
answer can be forced; real Prometheus is used in tests/integration.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import pytest

from adapter.errors import NoTargets
from adapter.sources import Gap, Sample, Scope, prometheus, prometheus_api, prometheus_body
from adapter.sources.prometheus import _KEYS_PER_TURN, _ROWS_PER_TURN, _SCOPES_PER_TURN, _plan
from adapter.sources.prometheus_answer import LOOKBACK_SECONDS
from adapter.sources.prometheus_body import ResultReader, Steps
from adapter.sources.prometheus_groups import Planner
from adapter.vocabulary.catalogue import MetricDef, PromQLSpec
from adapter.vocabulary.promql.combined import PART_LABEL, REF_LABEL
from adapter.vocabulary.selectors import parse
from tests.fakes import HandClock
from tests.sources.prometheus_fake import (
    INFLIGHT,
    NOW,
    SEL,
    TTFT,
    WAITING,
    StartProm,
    answer,
    fetch_once,
    vector,
)


async def test_value_count_and_oldest_raw_sample_time(prom: StartProm) -> None:
    """A combined answer yields value, target count, and the oldest of the raw selectors' sample times."""
    source, seen = await prom(
        answer(vector(("value", 12), ("count", 3), ("timestamp", NOW - 7), ("timestamp", NOW - 2)))
    )
    try:
        sample = await source.fetch(INFLIGHT, "prod", SEL)
    finally:
        await source.close()
    assert (sample.value, sample.targets, sample.gaps) == (12.0, 3, ())
    assert sample.timestamp == pytest.approx(NOW - 7)
    assert 'namespace="prod", model_name="llama"' in seen[0].query
    for family in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
        assert f'min(timestamp({family}{{namespace="prod", model_name="llama"}}))' in seen[0].query


@pytest.mark.parametrize(
    ("document", "check"),
    [
        pytest.param(
            vector(("count", 2), ("timestamp", NOW)), lambda v: v is None, id="targets without value"
        ),
        pytest.param(vector(("value", "NaN"), ("count", 2), ("timestamp", NOW)), math.isnan, id="NaN as is"),
        pytest.param(
            vector(("value", "+Inf"), ("count", 2), ("timestamp", NOW)),
            lambda v: v == math.inf,
            id="+Inf as is",
        ),
        pytest.param(
            vector(("value", "0.0005"), ("count", 1), ("timestamp", NOW)),
            lambda v: v == 0.0005,
            id="an unresolved quantile as is (the provider judges it)",
        ),
    ],
)
async def test_values_are_reported_raw(
    prom: StartProm, document: dict[str, Any], check: Callable[[float | None], bool]
) -> None:
    """Healthy source and targets: the value is reported as
    computed; NaN/Inf/empty are the provider's to judge."""
    assert check((await fetch_once(prom, document, TTFT)).value)


@pytest.mark.parametrize(
    "stamps",
    [
        pytest.param(("NaN", NOW), id="NaN first"),
        pytest.param((NOW, "NaN"), id="NaN last"),
    ],
)
async def test_nan_sample_time_passes_through(
    prom: StartProm, stamps: tuple[float | str, float | str]
) -> None:
    """A raw sample time that is NaN makes the sample time NaN wherever it is (the provider answers 503)."""
    document = vector(("value", 4), ("count", 1), *(("timestamp", stamp) for stamp in stamps))
    assert math.isnan((await fetch_once(prom, document, INFLIGHT)).timestamp)


async def test_gauge_gaps_name_family_and_target(prom: StartProm) -> None:
    """Absent and non-finite gauge families come back as gaps naming the family and the pod (or the
    scrape instance when the series carry no pod label)."""
    document = vector(
        ("value", 40),
        ("count", 3),
        ("timestamp", NOW),
        ("absent", 1, {REF_LABEL: "vllm:num_requests_waiting", "namespace": "prod", "pod": "b"}),
        ("nonfinite", "+Inf", {REF_LABEL: "vllm:num_requests_waiting", "namespace": "prod", "pod": "a"}),
        ("nonfinite", "NaN", {REF_LABEL: "vllm:num_requests_running", "instance": "10.0.0.5:8000"}),
    )
    sample = await fetch_once(prom, document, INFLIGHT)
    assert sample.value == 40.0
    assert sample.gaps == (
        Gap("vllm:num_requests_running", "10.0.0.5:8000", "nan"),
        Gap("vllm:num_requests_waiting", "prod/a", "inf"),
        Gap("vllm:num_requests_waiting", "prod/b", "absent"),
    )


async def test_queries_are_evaluated_at_the_refresh_interval(prom: StartProm) -> None:
    """The `time` parameter is now aligned down to the refresh interval, so replicas ask the same question."""
    clock = HandClock()
    clock.now = 1_800_000_007.9
    source, seen = await prom(
        answer(vector(("value", 1), ("count", 1), ("timestamp", NOW))), wall=clock, refresh_interval=5.0
    )
    try:
        await source.fetch(WAITING, "prod", SEL)
        clock.now = 1_800_000_009.99
        await source.fetch(WAITING, "prod", SEL)
        clock.now = 1_800_000_010.0
        await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()
    assert [request.time for request in seen] == ["1800000005.000", "1800000005.000", "1800000010.000"]


async def test_no_targets(prom: StartProm) -> None:
    """An empty vector means no series matched at all: NoTargets, not zero."""
    source, _ = await prom(answer(vector()))
    try:
        with pytest.raises(NoTargets):
            await source.fetch(WAITING, "prod", SEL)
    finally:
        await source.close()


async def test_user_query_freshness_comes_from_its_raw_selectors(prom: StartProm) -> None:
    """A user query is dated by `timestamp()` of each vector selector the parser finds in it (without
    offset), with the request's matchers filled in; a scalar query is wrapped in `vector()`."""
    user = MetricDef(
        "queue_depth",
        "h",
        "",
        PromQLSpec(
            'scalar(sum(sqs{queue="a", <<.LabelMatchers>>}) / max(rate(x{<<.LabelMatchers>>}[5m] offset 1m)))'
        ),
        on_empty=None,
    )
    source, seen = await prom(answer(vector(("value", 4), ("timestamp", NOW - 30), ("timestamp", NOW - 3))))
    try:
        sample = await source.fetch(user, "prod", parse(""))
    finally:
        await source.close()
    assert (sample.value, sample.targets, sample.gaps) == (4.0, None, ())
    assert sample.timestamp == pytest.approx(NOW - 30)
    query = seen[0].query
    assert query.startswith('label_replace(vector(scalar(sum(sqs{queue="a", namespace="prod"}) / max(rate(')
    assert 'min(timestamp(sqs{queue="a", namespace="prod"}))' in query
    assert 'min(timestamp(x{namespace="prod"}))' in query


async def test_value_without_any_recent_raw_sample_is_at_least_a_lookback_old(prom: StartProm) -> None:
    """A value whose raw selectors have no sample within Prometheus' lookback (e.g. `max_over_time` of
    a dead exporter) is dated a lookback before the evaluation time: a true lower bound, never "now"."""
    clock = HandClock()
    clock.now = NOW
    user = MetricDef("q", "h", "", PromQLSpec("max_over_time(q{<<.LabelMatchers>>}[1h])"), on_empty=None)
    source, _ = await prom(answer(vector(("value", 9))), wall=clock, refresh_interval=1.0)
    try:
        sample = await source.fetch(user, "prod", parse(""))
    finally:
        await source.close()
    assert sample.value == 9.0
    assert sample.timestamp == math.floor(NOW) - LOOKBACK_SECONDS


async def test_constant_user_query_is_dated_by_its_evaluation(prom: StartProm) -> None:
    """A query without any selector (a constant) is as fresh as its evaluation; it has no count part."""
    clock = HandClock()
    clock.now = NOW
    user = MetricDef("c", "h", "", PromQLSpec("vector(3)"), namespaced=False, on_empty=None)
    source, seen = await prom(answer(vector(("value", 3))), wall=clock, refresh_interval=1.0)
    try:
        sample = await source.fetch(user, None, parse(""))
    finally:
        await source.close()
    assert sample == Sample(3.0, math.floor(NOW), None, ())
    assert seen[0].query == 'label_replace((vector(3)), "adapter_part", "value", "", "")'


async def test_a_first_fetch_keeps_no_query_and_a_key_refreshed_alone_does(prom: StartProm) -> None:
    """A key's first fetch renders its query without keeping it (from then on a grouped query mostly
    serves it: a thousand kept queries were 4 MiB); a key refreshed on its own query keeps it."""
    source, _ = await prom(answer(vector(("value", 1), ("count", 1), ("timestamp", NOW))))
    _plan.cache_clear()
    try:
        first = await source.fetch(INFLIGHT, "prod", SEL)
        kept_after_first = _plan.cache_info().currsize
        (alone,) = await source.fetch_many(INFLIGHT, [Scope("prod", parse("model_name!=llama"))])
    finally:
        await source.close()
    assert first == alone == Sample(1.0, NOW, 1, ())
    assert kept_after_first == 0
    assert _plan.cache_info().currsize == 1


class OtherWork:
    """A task standing for requests: it counts the turns the event loop gives it until stopped."""

    def __init__(self) -> None:
        self.turns = 0
        self._running = True
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while self._running:
            self.turns += 1
            await asyncio.sleep(0)

    async def stop(self) -> None:
        self._running = False
        await self._task


async def test_a_grouped_answer_is_read_between_turns_of_the_event_loop(
    prom: StartProm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thousand keys' grouped answer is read and judged a part at a time, the event loop running
    other work (requests) between parts; every key still gets its group's sample."""
    source, _ = await prom(answer(vector()))
    groups = [(f"ns{n}", f"m{m}") for n in range(100) for m in range(10)]
    rows = [
        {"metric": {PART_LABEL: part, "namespace": ns, "model_name": model}, "value": [NOW, value]}
        for part, value in (("value", "7"), ("count", "1"), ("timestamp", str(NOW - 1)))
        for ns, model in groups
    ]

    async def answered(promql: str, at: float | None = None, reader: object = None) -> tuple[str, Any]:
        return "vector", rows  # no I/O: every turn the loop gets comes from reading the answer

    monkeypatch.setattr(source, "query", answered)
    other = OtherWork()
    try:
        outcomes = await source.fetch_many(
            INFLIGHT, [Scope(ns, parse(f"model_name={m}")) for ns, m in groups]
        )
    finally:
        await other.stop()
        await source.close()
    assert outcomes == [Sample(7.0, NOW - 1, 1, ())] * len(groups)
    assert other.turns >= len(rows) // _ROWS_PER_TURN + len(groups) // _KEYS_PER_TURN


async def test_an_answer_is_parsed_between_turns_of_the_event_loop(
    prom: StartProm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source parses a body through `body_steps` and lets the event loop run other work at each of
    its yields (a thousand keys' answer is otherwise one `json.loads` of 3 ms)."""
    source, _ = await prom(answer(vector(("value", 1), ("count", 1), ("timestamp", NOW))))
    real = prometheus_body.body_steps
    turns_at_yields: list[int] = []
    other = OtherWork()

    def counted(
        status: int, body: bytes | bytearray, reader: ResultReader | None = None
    ) -> Steps[tuple[str, Any]]:
        for _ in range(3):
            turns_at_yields.append(other.turns)
            yield
        return (yield from real(status, body, reader))

    monkeypatch.setattr(prometheus_api, "body_steps", counted)
    try:
        sample = await source.fetch(INFLIGHT, "prod", SEL)
    finally:
        await other.stop()
        await source.close()
    assert sample == Sample(1.0, NOW, 1, ())
    assert len(turns_at_yields) == 3
    assert turns_at_yields[0] < turns_at_yields[1] < turns_at_yields[2]


async def test_a_fleet_of_keys_is_planned_between_turns_of_the_event_loop(
    prom: StartProm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before its grouped query is sent, a refresh of a thousand keys plans their batches a part at a
    time, the event loop running other work (requests) between parts."""
    source, _ = await prom(answer(vector()))
    groups = [(f"ns{n}", f"m{m}") for n in range(100) for m in range(10)]
    turns_when_sent: list[int] = []
    other = OtherWork()

    async def answered(promql: str, at: float | None = None, reader: object = None) -> tuple[str, Any]:
        turns_when_sent.append(other.turns)
        return "vector", []

    monkeypatch.setattr(source, "query", answered)
    try:
        outcomes = await source.fetch_many(
            INFLIGHT, [Scope(ns, parse(f"model_name={m}")) for ns, m in groups]
        )
    finally:
        await other.stop()
        await source.close()
    assert len(turns_when_sent) == 1  # one grouped query
    assert all(isinstance(outcome, NoTargets) for outcome in outcomes)
    assert turns_when_sent[0] >= len(groups) // _SCOPES_PER_TURN


async def test_keys_reading_one_group_each_get_its_sample(
    prom: StartProm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`model_name=m` and `model_name in (m)` are two keys of one group: both read its rows."""
    source, _ = await prom(answer(vector()))
    rows = [
        {"metric": {PART_LABEL: part, "namespace": "prod", "model_name": "m"}, "value": [NOW, value]}
        for part, value in (("value", "7"), ("count", "1"), ("timestamp", str(NOW - 1)))
    ]

    async def answered(promql: str, at: float | None = None, reader: object = None) -> tuple[str, Any]:
        return "vector", rows

    monkeypatch.setattr(source, "query", answered)
    try:
        outcomes = await source.fetch_many(
            INFLIGHT, [Scope("prod", parse("model_name=m")), Scope("prod", parse("model_name in (m)"))]
        )
    finally:
        await source.close()
    assert outcomes == [Sample(7.0, NOW - 1, 1, ())] * 2


async def test_a_plan_is_kept_while_the_scopes_are_the_same(
    prom: StartProm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh of the same scopes reuses the last plan (a fleet's keys mostly stay); other scopes
    are planned again, and every key reads its own group either way."""
    source, _ = await prom(answer(vector()))
    rows = [
        {"metric": {PART_LABEL: part, "namespace": ns, "model_name": "m"}, "value": [NOW, value]}
        for ns, seven in (("a", "7"), ("b", "8"), ("c", "9"))
        for part, value in (("value", seven), ("count", "1"), ("timestamp", str(NOW - 1)))
    ]

    async def answered(promql: str, at: float | None = None, reader: object = None) -> tuple[str, Any]:
        return "vector", rows

    planners: list[object] = []
    real = Planner

    def counted(metric: MetricDef) -> Planner:
        planners.append(metric)
        return real(metric)

    monkeypatch.setattr(source, "query", answered)
    monkeypatch.setattr(prometheus, "Planner", counted)
    ab = [Scope("a", parse("model_name=m")), Scope("b", parse("model_name=m"))]
    try:
        first = await source.fetch_many(INFLIGHT, ab)
        again = await source.fetch_many(INFLIGHT, list(ab))
        planned_twice = len(planners)
        other = await source.fetch_many(INFLIGHT, [ab[1], Scope("c", parse("model_name=m"))])
    finally:
        await source.close()
    assert first == again == [Sample(7.0, NOW - 1, 1, ()), Sample(8.0, NOW - 1, 1, ())]
    assert planned_twice == 1
    assert len(planners) == 2
    assert other == [Sample(8.0, NOW - 1, 1, ()), Sample(9.0, NOW - 1, 1, ())]
