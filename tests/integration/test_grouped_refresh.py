"""Grouped refresh answers exactly what each key's own query answers, on a real Prometheus.

The property: for a random fleet (pods in two namespaces, two models, an optional `tier` label, one or
two engines, old or new vLLM names, fresh, stale or gone, gauges numbers, NaN, Inf or absent,
histograms busy, idle or absent) and random keys (every built-in metric, a saturation metric and a
user PromQL metric; namespaces with and without pods; selectors that a group serves and selectors
that must fall back), `PrometheusSource.fetch_many` returns for every key the same `Sample` (value,
oldest sample time, target count, gauge gaps) or the same error as `fetch`, evaluated at the same
instant, in at most one query per selector shape plus one per fallback key. The provider's failure
table is a function of the `Sample` and the clock, so equal samples are equal answers; the last test
walks the table through a grouped refresh to show each rule is reached.

Each example writes its fleet through Prometheus' remote-write receiver into namespaces of its own,
so examples do not see each other's pods, at sample times the test chooses (`tests/integration/fleets.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter.cache import ValueCache
from adapter.config import load
from adapter.errors import (
    AdapterError,
    EmptyResult,
    GaugeGap,
    NoTargets,
    StaleSample,
    Unresolved,
)
from adapter.provider import CachedProvider
from adapter.sources import Sample, Scope
from adapter.sources.prometheus import PrometheusSource
from adapter.telemetry import Telemetry
from adapter.vocabulary import catalogue
from adapter.vocabulary.catalogue import MetricDef, PromQLSpec
from adapter.vocabulary.selectors import parse
from tests.fakes import Ticker
from tests.integration import procs
from tests.integration.fleets import Pod, series
from tests.integration.remote_write import push

pytestmark = pytest.mark.integration

#: the evaluation instant of every query: whole seconds, so a 1 s refresh interval does not move it
NOW = float(math.floor(time.time()))
USER = MetricDef(
    "queue_depth",
    "user PromQL: always its own query",
    "requests",
    PromQLSpec(
        "sum(vllm:num_requests_waiting{<<.LabelMatchers>>})", "vllm:num_requests_running{<<.LabelMatchers>>}"
    ),
    on_empty=None,
)
METRICS = (*catalogue.BUILTIN, catalogue.saturation(10, kv_target=0.9, queue_target=4), USER)
# (requirement, the Prometheus label it holds to one value, or None when no group can serve it)
ATOMS = (
    ("model_name=m1", "model_name"),
    ("model_name==m2", "model_name"),
    ("model_name in (m1)", "model_name"),
    ("tier=x", "tier"),
    ("!tier", "tier"),
    ("tier=", "tier"),
    ("model_name!=m1", None),
    ("model_name in (m1,m2)", None),
    ("model_name notin (m2)", None),
    ("tier", None),
    ("tier in (x,y)", None),
)
_examples = itertools.count()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[procs.Process]:
    """A real Prometheus that scrapes nothing and takes remote writes."""
    workdir: Path = tmp_path_factory.mktemp("prometheus")
    with procs.prometheus(workdir, [], extra_args=("--web.enable-remote-write-receiver",)) as prom:
        yield prom


def _source(url: str, queries: list[str]) -> PrometheusSource:
    settings_ = load(f"prometheus: {{url: '{url}', refresh_interval: 1s, timeout: 5s}}").prometheus
    return PrometheusSource(settings_, wall=lambda: NOW, observe=lambda outcome, _s: queries.append(outcome))


async def _outcome(source: PrometheusSource, metric: MetricDef, scope: Scope) -> Sample | AdapterError:
    try:
        return await source.fetch(metric, scope.namespace, scope.selector)
    except AdapterError as exc:
        return exc


def _same(alone: Sample | AdapterError, grouped: Sample | AdapterError) -> bool:
    """Equal samples (NaN equal to NaN) or errors of one class with one message."""
    if isinstance(alone, AdapterError):
        return type(alone) is type(grouped) and str(alone) == str(grouped)
    if not isinstance(grouped, Sample):
        return False
    return all(
        a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
        for a, b in zip(alone, grouped, strict=True)
    )


def _shape(atoms: tuple[str, ...]) -> frozenset[str] | None:
    """The labels a selector holds to one value each, or `None` when it must take its own query
    (restated from the atoms, independently of `Selector.pins`)."""
    labels = [dict(ATOMS)[atom] for atom in atoms]
    if any(label is None for label in labels) or len(set(labels)) != len(labels):
        return None
    return frozenset(label for label in labels if label is not None)


def _most_queries(metric: MetricDef, selectors: list[tuple[str, ...]]) -> int:
    """One query per selector shape, plus one per key that no group serves."""
    if isinstance(metric.spec, PromQLSpec):
        return len(selectors)
    shapes = [_shape(s) for s in selectors]
    return len({s for s in shapes if s is not None}) + sum(s is None for s in shapes)


_gauge = st.one_of(st.sampled_from([0.0, 1.0, 3.0, 7.0, 12.0]), st.sampled_from([None, math.nan, math.inf]))
_pod = st.fixed_dictionaries(
    {
        "namespace": st.sampled_from(["a", "b"]),
        "model": st.sampled_from(["m1", "m2"]),
        "tier": st.sampled_from([None, "x", "y"]),
        "engines": st.integers(1, 2),
        "old": st.booleans(),
        "age": st.sampled_from([0.0, 5.0, 40.0, 100.0, 400.0]),
        "running": _gauge,
        "waiting": _gauge,
        "kv": st.sampled_from([0.0, 0.25, 0.9, None, math.nan]),
        "traffic": st.sampled_from([None, 0.0, 1.0, 5.0]),
        "tpot": st.sampled_from([0.005, 0.03, 0.2, 100.0]),
        "ttft": st.sampled_from([0.0005, 0.05, 0.3, 5000.0]),
    }
)
# Half the selectors a single requirement a group serves, so most examples hold batches of several keys.
_selector = st.one_of(
    st.sampled_from([(atom,) for atom, label in ATOMS if label is not None]),
    st.lists(st.sampled_from([atom for atom, _ in ATOMS]), max_size=2, unique=True).map(tuple),
)
_scope = st.tuples(st.sampled_from(["a", "b", "empty"]), _selector)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pods=st.lists(_pod, max_size=8), keys=st.lists(_scope, min_size=1, max_size=12, unique=True))
def test_grouped_refresh_answers_as_each_key_alone(
    prometheus: procs.Process, pods: list[dict[str, object]], keys: list[tuple[str, tuple[str, ...]]]
) -> None:
    """For every metric, every key's grouped outcome equals its own query's, in at most one query
    per selector shape plus one per fallback key."""
    prefix = f"g{next(_examples)}-"
    fleet = [
        Pod(**{**pod, "namespace": prefix + str(pod["namespace"]), "name": f"pod-{i}"})  # type: ignore[arg-type]
        for i, pod in enumerate(pods)
    ]
    push(prometheus.url, [s for pod in fleet for s in series(pod, NOW)])
    scopes = [Scope(prefix + ns, parse(",".join(atoms))) for ns, atoms in keys]
    most = {metric.name: _most_queries(metric, [atoms for _ns, atoms in keys]) for metric in METRICS}

    async def compare(metric: MetricDef, source: PrometheusSource, queries: list[str]) -> None:
        alone = [await _outcome(source, metric, scope) for scope in scopes]
        queries.clear()
        grouped = await source.fetch_many(metric, scopes)
        assert len(queries) <= most[metric.name], metric.name
        for scope, one, many in zip(scopes, alone, grouped, strict=True):
            assert _same(one, many), f"{metric.name} {scope}: alone {one!r}, grouped {many!r}"

    async def compare_all() -> None:
        queries: list[str] = []
        source = _source(prometheus.url, queries)
        try:
            for metric in METRICS:
                await compare(metric, source, queries)
        finally:
            await source.close()

    asyncio.run(compare_all())


def test_one_query_per_metric_serves_a_fleet_of_keys(prometheus: procs.Process) -> None:
    """40 keys over 4 namespaces x 10 models of one shape cost one query, each answered as alone."""
    prefix = f"g{next(_examples)}-"
    fleet = [
        Pod(f"{prefix}ns{n}", f"pod-{m}", f"model-{m}", running=float(n + m))
        for n in range(4)
        for m in range(10)
    ]
    push(prometheus.url, [s for pod in fleet for s in series(pod, NOW)])
    metric = catalogue.builtin("vllm_requests_inflight")
    scopes = [Scope(f"{prefix}ns{n}", parse(f"model_name=model-{m}")) for n in range(4) for m in range(10)]

    async def refresh() -> tuple[list[Sample | AdapterError], list[Sample | AdapterError], int]:
        queries: list[str] = []
        source = _source(prometheus.url, queries)
        try:
            grouped = await source.fetch_many(metric, scopes)
            sent = len(queries)
            alone = [await _outcome(source, metric, scope) for scope in scopes]
        finally:
            await source.close()
        return grouped, alone, sent

    grouped, alone, sent = asyncio.run(refresh())
    assert sent == 1
    assert [s.value for s in grouped if isinstance(s, Sample)] == [
        float(n + m + 1) for n in range(4) for m in range(10)
    ]
    assert all(_same(one, many) for one, many in zip(alone, grouped, strict=True))


# One pod per rule, each in its own model, all keys of one shape (namespace, model_name), so one
# grouped query must keep every rule apart.
RULES = {
    "fresh": (Pod("", "p-fresh", "fresh", running=4, waiting=2), "vllm_requests_inflight", 6.0),
    "stale": (Pod("", "p-stale", "stale", age=100.0), "vllm_requests_inflight", StaleSample),
    "gone": (Pod("", "p-gone", "gone", age=400.0), "vllm_requests_inflight", NoTargets),
    "absent gauge": (Pod("", "p-absent", "absent", waiting=None), "vllm_requests_inflight", GaugeGap),
    "nan gauge": (Pod("", "p-nan", "nan", kv=math.nan), "vllm_kv_cache_usage", GaugeGap),
    "idle window": (Pod("", "p-idle", "idle", traffic=0.0), "vllm_tpot_seconds", 0.0),
    "first bucket": (Pod("", "p-fast", "fast", ttft=0.0005), "vllm_ttft_seconds", Unresolved),
    "user, empty": (Pod("", "p-user", "user", waiting=math.nan), "queue_depth", EmptyResult),
}


@pytest.mark.parametrize("rule", list(RULES))
def test_every_failure_rule_survives_a_grouped_refresh(prometheus: procs.Process, rule: str) -> None:
    """Through the provider and its cache, a key refreshed on a tick together with the other pods'
    keys (one grouped query; a user metric's keys one each) gets the answer its rule gives."""
    namespace = f"g{next(_examples)}-r"
    pods = [Pod(**{**pod.__dict__, "namespace": namespace}) for pod, _metric, _expected in RULES.values()]
    push(prometheus.url, [s for pod in pods for s in series(pod, NOW)])
    target, metric_name, expected = RULES[rule]
    selectors = [parse(f"model_name={pod.model}") for pod in pods]
    selector = parse(f"model_name={target.model}")

    async def answer() -> tuple[object, int, object]:
        queries: list[str] = []
        source = _source(prometheus.url, queries)
        ticker = Ticker(wall=NOW)
        cache = ValueCache(1.0, 60.0, wall=ticker, sleep=ticker.sleep)
        provider = CachedProvider(
            METRICS, source, cache, default_max_age=90.0, telemetry=Telemetry(), wall=lambda: NOW
        )
        try:
            for each in selectors:  # each key's first fetch is its own query
                with contextlib.suppress(AdapterError):
                    await provider.get(metric_name, namespace, each)
            queries.clear()
            await ticker.tick()  # the refresh of every key together
            sent = len(queries)
            try:
                value: object = (await provider.get(metric_name, namespace, selector)).value
            except AdapterError as exc:
                value = exc
            metric = provider.lookup(metric_name)
            try:
                own = await source.fetch(metric, namespace, selector)
                alone: object = provider.resolve(metric, own, selector).value
            except AdapterError as exc:
                alone = exc
            return value, sent, alone
        finally:
            await cache.close()
            await source.close()

    value, sent, alone = asyncio.run(answer())
    assert (type(value) if isinstance(value, AdapterError) else value) == expected
    assert repr(value) == repr(alone), "the answer (an error's message too) is the key's own query's"
    assert sent == (len(pods) if metric_name == USER.name else 1)
