"""The queries of the prefill-and-decode dashboard: a disaggregated model's series per role, the
alerts' recorded estimates, and the ready pods of each role's Deployment (kube-state-metrics).

A role's series carry the role label the chart's monitors copy from the pods (`llm_d_ai_role`,
alerts.params' default `role_label`); an aggregated model has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from adapter.vocabulary import vllm
from adapter.vocabulary.exporters import DEPLOYMENT_READY
from adapter.vocabulary.promql.expressions import aggregate, histogram_mean, rate, selector, series
from alerts import disaggregated as pd
from alerts.params import Params
from dashboards.queries.grafana import BY_MODEL, BY_POD, MODEL, NAMESPACE, POD, RATE, Query, legend, query

_DEFAULTS: Final = Params()
PREFILL: Final = f'{_DEFAULTS.role_label}="{_DEFAULTS.prefill_role}"'
DECODE: Final = f'{_DEFAULTS.role_label}="{_DEFAULTS.decode_role}"'
#: the chart names a disaggregated model's Deployments <model's full name>-prefill and -decode
_POOL: Final = "pool"
#: the label of `vllm.KV_FETCH_BY_STAGE` holding one of `vllm.KV_FETCH_STAGES`
_STAGE: Final = "stage"


def _role(role: str) -> tuple[str, ...]:
    return (NAMESPACE, MODEL, POD, role)


def _per_second(family: vllm.Family, labels: Sequence[str], matchers: Sequence[str]) -> str:
    return aggregate("sum", labels, rate(family, RATE, matchers))


def prefill_backlog() -> Query:
    """The alerts' estimate, per model: waiting requests over the pool's finishing rate."""
    recorded = selector(pd.PREFILL_BACKLOG_RECORD, (NAMESPACE, MODEL))
    return query(aggregate("max", BY_MODEL, recorded), legend(BY_MODEL, "backlog"))


def prompt_throughput() -> Query:
    return query(_per_second(vllm.PROMPT_TOKENS, BY_POD, _role(PREFILL)), legend(BY_POD, "prompt tokens/s"))


def role_mean(family: vllm.Family, role: str, name: str) -> Query:
    return query(histogram_mean(family, RATE, _role(role), BY_MODEL), legend(BY_MODEL, name))


def decode_gauge(family: vllm.Family, operator: str, name: str) -> Query:
    return query(aggregate(operator, BY_POD, series(family, _role(DECODE))), legend(BY_POD, name))


def _ready(role: str) -> str:
    ready = selector(DEPLOYMENT_READY, (NAMESPACE, f'deployment=~".+-{role}"'))
    return f'label_replace({ready}, "{_POOL}", "$1", "deployment", "(.+)-{role}")'


def pd_ratio() -> Query:
    """Ready prefill pods over ready decode pods of each disaggregated model (its Deployments' pair)."""
    by = ("namespace", _POOL)
    ratio = f"{aggregate('sum', by, _ready('prefill'))} / {aggregate('sum', by, _ready('decode'))}"
    return query(ratio, legend((_POOL,), "P:D"))


def ready_pods(role: str) -> Query:
    return query(aggregate("sum", ("namespace", _POOL), _ready(role)), legend((_POOL,), f"{role} ready"))


def kv_fetches() -> Query:
    """Requests the decode pool is receiving KV for, per model and stage (what the adapter serves as
    `vllm_kv_fetch_requests`, summed over the stages)."""
    by = (*BY_MODEL, _STAGE)
    return query(aggregate("sum", by, series(vllm.KV_FETCH_BY_STAGE, _role(DECODE))), legend(by))


def recomputed_share() -> Query:
    recorded = selector(pd.DECODE_RECOMPUTE_SHARE_RECORD, (NAMESPACE, MODEL))
    return query(aggregate("max", BY_MODEL, recorded), legend(BY_MODEL, "recomputed on decode"))
