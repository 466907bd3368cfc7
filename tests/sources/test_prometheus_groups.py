"""Which keys share a grouped query (`prometheus_groups.plan`), its matchers and each key's slice."""

from __future__ import annotations

import pytest

from adapter.errors import NoTargets, SourceUnavailable
from adapter.sources import Sample, Scope
from adapter.sources.prometheus_groups import Batch, Slices, plan
from adapter.vocabulary import catalogue
from adapter.vocabulary.catalogue import MetricDef, PromQLSpec
from adapter.vocabulary.selectors import parse

INFLIGHT = catalogue.builtin("vllm_requests_inflight")
CLUSTER_WIDE = INFLIGHT.with_overrides(namespaced=False)


def scopes(*keys: tuple[str | None, str]) -> list[Scope]:
    return [Scope(namespace, parse(selector)) for namespace, selector in keys]


def shape(
    metric: MetricDef, *keys: tuple[str | None, str]
) -> tuple[list[tuple[tuple[str, ...], list[int]]], list[int]]:
    batches, alone = plan(metric, scopes(*keys))
    return [(b.by, b.indices) for b in batches], alone


@pytest.mark.parametrize(
    ("metric", "keys", "expected"),
    [
        pytest.param(
            INFLIGHT,
            [("a", "model_name=x"), ("b", "model_name=y"), ("a", "model_name in (y)")],
            ([(("namespace", "model_name"), [0, 1, 2])], []),
            id="keys pinning the same labels share one query by namespace and those labels",
        ),
        pytest.param(
            INFLIGHT,
            [("a", "model_name=x"), ("b", "model_name=x,tier=t"), ("c", "model_name=x,!tier")],
            ([(("namespace", "model_name", "tier"), [1, 2])], [0]),
            id="one batch per shape; a shape of one key takes its own query",
        ),
        pytest.param(
            INFLIGHT,
            [
                ("a", "model_name!=x"),
                ("b", "model_name in (x,y)"),
                ("c", "tier"),
                ("d", "model_name notin (x)"),
            ],
            ([], [0, 1, 2, 3]),
            id="inequality, sets, existence and notin fall back",
        ),
        pytest.param(
            INFLIGHT,
            [("a", "namespace=a"), ("b", "namespace=b")],
            ([], [0, 1]),
            id="a selector on namespace beside the path's namespace falls back",
        ),
        pytest.param(
            INFLIGHT, [("a", "le=1"), ("b", "le=2")], ([], [0, 1]), id="a selector on le falls back"
        ),
        pytest.param(
            CLUSTER_WIDE,
            [(None, "namespace=a"), (None, "namespace=b")],
            ([(("namespace",), [0, 1])], []),
            id="a cluster-wide metric groups by the selector's labels only",
        ),
        pytest.param(
            MetricDef("q", "h", "", PromQLSpec("sum(sqs{<<.LabelMatchers>>})")),
            [("a", "queue=x"), ("b", "queue=y")],
            ([], [0, 1]),
            id="user PromQL always takes its own query",
        ),
    ],
)
def test_plan(metric: MetricDef, keys: list[tuple[str | None, str]], expected: object) -> None:
    """Keys are batched by the labels they hold to one value; the others query alone."""
    assert shape(metric, *keys) == expected


def test_batch_matchers_keep_only_the_groups_asked_for() -> None:
    """Each group label is restricted to the values in use (regex-escaped; the empty value for `!k`)."""
    (batch,), _ = plan(INFLIGHT, scopes(("a", "model_name=x.1,!tier"), ("b", "model_name=y,tier=t")))
    assert batch.matchers() == ['namespace=~"a|b"', 'model_name=~"x\\\\.1|y"', 'tier=~"|t"']


def test_slices_give_each_member_the_rows_of_its_group() -> None:
    """A row belongs to the group of its labels; a label the row lacks reads as the empty value; a
    group without rows has no targets."""
    slices = Slices(("namespace", "tier"))
    slices.begin()
    elements = [
        {"metric": {"namespace": "a", "tier": "t", "adapter_part": "value"}, "value": [9, "1"]},
        {"metric": {"namespace": "a", "adapter_part": "value"}, "value": [9, "2"]},
        {"metric": {"namespace": "a", "tier": "t", "adapter_part": "count"}, "value": [9, "3"]},
        {"metric": {"namespace": "a", "adapter_part": "count"}, "value": [9, "1"]},
    ]
    slices.read(elements[:1])  # an answer is read a part at a time
    slices.read(elements[1:])
    slices.check()
    samples = [
        slices.sample(INFLIGHT, group, last=last, evaluated_at=9, counted=True, dated=False)
        for group, last in [(("a", "t"), False), (("a", ""), True), (("b", "t"), True), (("a", "t"), True)]
    ]
    assert samples[:2] == [Sample(1.0, 9, 3, ()), Sample(2.0, 9, 1, ())]
    assert isinstance(samples[2], NoTargets)
    assert samples[3] == samples[0]  # two members of one group: the group is kept for the last


def test_the_last_reader_of_each_group() -> None:
    batch = Batch(("namespace",), [0, 1, 2], [("a",), ("b",), ("a",)])
    assert batch.last_readers() == [False, True, True]


def test_slices_report_a_malformed_element_when_checked() -> None:
    """A malformed element is reported by `check`, after the answer is judged, and a new array
    (`begin`: a repeated `result` key) forgets it."""
    slices = Slices(("namespace",))
    slices.begin()
    slices.read([{"metric": {"namespace": "a"}, "value": [9]}])
    with pytest.raises(SourceUnavailable, match="malformed sample"):
        slices.check()
    slices.begin()
    slices.check()
