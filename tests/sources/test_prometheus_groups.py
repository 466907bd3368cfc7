"""Which keys share a grouped query (`prometheus_groups.plan`), its matchers and each key's slice."""

from __future__ import annotations

import pytest

from adapter.sources import Scope
from adapter.sources.prometheus_answer import Row
from adapter.sources.prometheus_groups import Batch, plan
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
    """A row belongs to the group of its labels; a label the row lacks reads as the empty value."""
    batch = Batch(("namespace", "tier"), [0, 1, 2], [("a", "t"), ("a", ""), ("b", "t")])
    rows = [
        Row({"namespace": "a", "tier": "t", "adapter_part": "value"}, 0, 1.0),
        Row({"namespace": "a", "adapter_part": "value"}, 0, 2.0),
        Row({"namespace": "a", "tier": "t", "adapter_part": "count"}, 0, 3.0),
    ]
    groups: dict[tuple[str, ...], list[Row]] = {}
    batch.sort(rows[:1], groups)  # an answer is sorted a part at a time
    batch.sort(rows[1:], groups)
    assert [groups.get(group, []) for group in batch.groups] == [[rows[0], rows[2]], [rows[1]], []]
