"""A metric the user defines by its PromQL (`metrics.<name>.query`), checked before it is ever sent.

The query and the presence query must parse as PromQL of the right kind, be scoped by
`<<.LabelMatchers>>` (unless the metric is explicitly cluster-wide) and read no raw counter without
rate(), increase() or histogram_quantile(rate(...)).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapter.errors import ConfigError, PromQLSyntaxError
from adapter.vocabulary import catalogue
from adapter.vocabulary.catalogue import LABEL_MATCHERS, MetricDef, PromQLSpec
from adapter.vocabulary.promql.check import raw_cumulative_series
from adapter.vocabulary.promql.parse import ResultType, parse_template, result_type

if TYPE_CHECKING:
    from adapter.config.metrics import MetricSettings


def user_metric(name: str, s: MetricSettings, path: str) -> MetricDef:
    """A metric the user defines by its PromQL, checked before it is ever sent."""
    if s.query is None:
        hint = (
            " (queue_depth and dlq_depth read your queue's exporter)"
            if name in catalogue.USER_DEFINED_NAMES
            else ""
        )
        raise ConfigError(
            f"config key '{path}.query' is required for user metric {name!r}{hint}, or "
            f"'{path}.capacity' for a saturation metric"
        )
    for forbidden in ("statistic", "quantile", "window"):
        if getattr(s, forbidden) is not None:
            raise ConfigError(
                f"config key '{path}.{forbidden}' applies only to built-in histogram metrics; "
                "write the statistic into 'query'"
            )
    _check_user_promql(s, path)
    raw = raw_cumulative_series(s.query)
    if raw:
        raise ConfigError(
            f"config key '{path}.query' value {s.query!r} reads cumulative series {raw} without "
            "rate(), increase() or histogram_quantile(rate(...)); wrap them, e.g. rate(x_total[2m])"
        )
    _check_scoped(s, path)
    return MetricDef(
        name=name,
        help=s.help or f"User-defined metric {name}.",
        unit=s.unit or "",
        spec=PromQLSpec(s.query, s.presence),
        # Without proof that targets exist, an empty answer is indistinguishable from a broken
        # exporter: fail closed unless the user says otherwise.
        on_empty=None,
    )


# What a request's matchers look like once filled in: a namespaced metric always gets the namespace;
# a cluster-wide one may get nothing at all (no selector).
_NAMESPACED_MATCHERS = ('namespace="default"',)


def _check_user_promql(s: MetricSettings, path: str) -> None:
    """The query (an instant vector or a scalar) and the presence query (an instant vector) parse."""
    variants = [_NAMESPACED_MATCHERS] + ([()] if s.namespaced is False else [])
    for key, template, allowed in (
        ("query", s.query, (ResultType.VECTOR, ResultType.SCALAR)),
        ("presence", s.presence, (ResultType.VECTOR,)),
    ):
        if template is None:
            continue
        for matchers in variants:
            try:
                kind = result_type(parse_template(template, matchers))
            except PromQLSyntaxError as exc:
                shown = (
                    f" with <<.LabelMatchers>> as {', '.join(matchers)!r}"
                    if LABEL_MATCHERS in template
                    else ""
                )
                raise ConfigError(
                    f"config key '{path}.{key}' value {template!r} is not valid PromQL{shown}: {exc}"
                ) from exc
            if kind not in allowed:
                kinds = " or ".join(
                    f"an instant {t.value}" if t is ResultType.VECTOR else f"a {t.value}" for t in allowed
                )
                raise ConfigError(
                    f"config key '{path}.{key}' value {template!r} evaluates to a {kind.value}; it must be "
                    f"{kinds}"
                )


def _check_scoped(s: MetricSettings, path: str) -> None:
    """A namespaced user metric must put the request's matchers into its queries: without them every
    namespace and selector would be answered with the same value, silently breaking isolation."""
    if s.namespaced is False:
        return
    for key, template in (("query", s.query), ("presence", s.presence)):
        if template is not None and LABEL_MATCHERS not in template:
            raise ConfigError(
                f"config key '{path}.{key}' value {template!r} has no {LABEL_MATCHERS}, so it would answer "
                f"every namespace and label selector with the same value; add it to the query's selectors, "
                f"e.g. sum(queue_messages{{{LABEL_MATCHERS}}}), or set '{path}.namespaced' to false to serve "
                "one cluster-wide value"
            )
