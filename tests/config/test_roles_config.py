"""The `roles` section, `vllm_prefill_backlog_seconds`'s keys
and pod labels of scrape targets (adapter/config/roles.py)."""

from __future__ import annotations

import pytest

from adapter.config import StaticTarget, load
from adapter.errors import ConfigError
from adapter.vocabulary.disaggregated import KV_FETCH, PREFILL_BACKLOG, PrefillBacklogSpec
from adapter.vocabulary.roles import Role


def served(text: str) -> dict[str, object]:
    return {m.name: m for m in load(text).catalogue()}


def test_the_backlog_is_served_only_once_its_throughput_is_configured() -> None:
    assert PREFILL_BACKLOG not in served("")
    metric = served(f"metrics: {{{PREFILL_BACKLOG}: {{prefill_throughput: 48000, window: 1m}}}}")[
        PREFILL_BACKLOG
    ]
    spec = metric.spec  # type: ignore[attr-defined]
    assert isinstance(spec, PrefillBacklogSpec)
    assert (spec.throughput, spec.prompt.window_seconds) == (48000.0, 60.0)
    assert metric.role == Role("prefill")  # type: ignore[attr-defined]
    assert metric.on_empty is None  # type: ignore[attr-defined]


def test_roles_default_to_llm_d_and_follow_the_configuration() -> None:
    assert served("")[KV_FETCH].role == Role("decode", "llm-d.ai/role", "decode")  # type: ignore[attr-defined]
    text = (
        "roles: {label: serving.kserve.io/component, prefill: prefiller, decode: decoder}\n"
        f"metrics: {{{PREFILL_BACKLOG}: {{prefill_throughput: 1000}}}}"
    )
    metrics = served(text)
    assert metrics[KV_FETCH].role == Role("decode", "serving.kserve.io/component", "decoder")  # type: ignore[attr-defined]
    assert metrics[PREFILL_BACKLOG].role == Role("prefill", "serving.kserve.io/component", "prefiller")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("roles: {label: 'bad key!'}", "config key 'roles.label' value 'bad key!' is not a valid label key"),
        ("roles: {prefill: 'a b'}", "config key 'roles.prefill' value 'a b' is not a valid label value"),
        ("roles: {decode: ''}", "config key 'roles.decode' must not be empty"),
        (
            "roles: {prefill: x, decode: x}",
            "config key 'roles.decode' value 'x' must differ from 'roles.prefill'",
        ),
        ("roles: {lable: x}", "config key 'roles.lable' is unknown; did you mean 'label'?"),
        (
            f"metrics: {{{PREFILL_BACKLOG}: {{window: 1m}}}}",
            f"config key 'metrics.{PREFILL_BACKLOG}.prefill_throughput' is required",
        ),
        (f"metrics: {{{PREFILL_BACKLOG}: {{prefill_throughput: 0}}}}", "value 0.0 must be a positive number"),
        (
            f"metrics: {{{PREFILL_BACKLOG}: {{prefill_throughput: 1000, window: 5s}}}}",
            "value 5s must be at least twice the refresh interval",
        ),
        (
            f"metrics: {{{PREFILL_BACKLOG}: {{prefill_throughput: 1000, statistic: mean}}}}",
            "takes only prefill_throughput and window",
        ),
        (
            "metrics: {vllm_kv_cache_usage: {prefill_throughput: 1000}}",
            "applies only to 'vllm_prefill_backlog_seconds'",
        ),
        (
            "source: scrape\nscrape: {targets: [{url: "
            "'http://a:1/metrics', labels: {'llm-d.ai/role': 'a b'}}]}",
            "config key 'scrape.targets[0].labels.llm-d.ai/role' is not a valid pod label",
        ),
        (
            "source: scrape\nscrape: {targets: [{url: 'http://a:1/metrics', labels: {namespace: x}}]}",
            "would replace the target label 'namespace'",
        ),
        (
            "source: scrape\nscrape: {targets: [{url: 'ftp://a/metrics'}]}",
            "config key 'scrape.targets[0].url' value 'ftp://a/metrics'",
        ),
        (
            "source: scrape\nscrape: {pod_labels: ['no good']}",
            "config key 'scrape.pod_labels[0].no good' is not a valid pod label",
        ),
    ],
)
def test_bad_role_configuration_is_one_line_naming_key_value_and_what_is_valid(
    text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_new_metric_with_a_throughput_is_another_backlog() -> None:
    metric = served("metrics: {backlog_llama: {prefill_throughput: 2000}}")["backlog_llama"]
    assert isinstance(metric.spec, PrefillBacklogSpec)  # type: ignore[attr-defined]


def test_static_targets_take_pod_labels_beside_plain_urls() -> None:
    config = load(
        "source: scrape\nscrape: {targets: ['http://a:1/metrics', "
        "{url: 'http://b:2/metrics', labels: {'llm-d.ai/role': prefill}}]}"
    )
    assert config.scrape.targets == (
        "http://a:1/metrics",
        StaticTarget("http://b:2/metrics", {"llm-d.ai/role": "prefill"}),
    )
