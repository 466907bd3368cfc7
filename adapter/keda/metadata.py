"""A KEDA `ScaledObjectRef` read as a question to the provider: which metric, where, and against what.

The trigger's `metadata` reaches us as `scalerMetadata`, string to string, with exactly these keys:

| key                | meaning                                                                 | default  |
|--------------------|-------------------------------------------------------------------------|----------|
| `metric`           | a catalogue name (`vllm_requests_inflight`, `queue_depth`, ...)         | required |
| `labelSelector`    | Kubernetes selector text, same grammar and escaping as the HTTP API     | all      |
| `target`           | per-replica target value (a number or a quantity such as `500m`), >= 1m | required |
| `activationTarget` | `IsActive` is true only while the value is above it, >= 0               | `0`      |

Each key may instead be given as `<key>FromEnv` naming an environment variable of the scaled
workload's container. KEDA resolves it and forwards it **under its own name** (`targetFromEnv: "12"`,
not `target: "12"`), and drops it when the variable is unset or empty (kedacore/keda
`pkg/scalers/external_scaler.go`, `parseExternalScalerMetadata`, unchanged from v2.16 to v2.20), so
both spellings are read here, and a key given both ways is refused rather than one silently winning.

KEDA passes the whole trigger metadata, so its own connection keys (`scalerAddress`, ...) arrive too
and are ignored. Any other key is refused with a message naming it: a misspelt `labelselector` would
otherwise silently select every pod. The namespace is the ScaledObject's own, checked with the HTTP
API's rule for the namespace of its path (`adapter.vocabulary.names`).

KEDA (v2.17 and later) turns `targetSizeFloat` into a milli-quantity: v2.17-v2.19 truncate
(`int64(target * 1000)`), v2.20 rounds to three decimals (`pkg/scalers/scaler.go`,
`GetMetricTargetMili`). A target below 1m would reach the HPA as 0 on some of them, so it is refused.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from adapter.errors import InvalidMetadata, InvalidNamespace, InvalidSelector
from adapter.vocabulary import selectors
from adapter.vocabulary.names import check_namespace, echo
from adapter.vocabulary.quantity import parse_quantity
from adapter.vocabulary.selectors import Selector

METRIC: Final = "metric"
LABEL_SELECTOR: Final = "labelSelector"
TARGET: Final = "target"
ACTIVATION_TARGET: Final = "activationTarget"
KEYS: Final = (METRIC, LABEL_SELECTOR, TARGET, ACTIVATION_TARGET)
#: the suffix of a key whose value KEDA resolved from the workload's environment
FROM_ENV: Final = "FromEnv"
#: trigger metadata that KEDA itself reads (connection and TLS settings) and forwards to every scaler
KEDA_KEYS: Final = frozenset(
    {"scalerAddress", "enableTLS", "unsafeSsl", "caCert", "tlsClientCert", "tlsClientKey"}
)
#: the smallest target every supported KEDA keeps above 0 (it stores targets in milli-units)
MIN_TARGET: Final = 0.001
#: keys people carry over from other KEDA scalers, with what they mean here
_HINTS: Final = {
    "activationThreshold": (
        "use 'activationTarget' (KEDA's activationThreshold does not apply to external scalers)"
    ),
    "threshold": "use 'target'",
    "metricName": "use 'metric'",
    "query": "use 'metric' with a catalogue name; queries are configured in the adapter",
    # kedacore/keda#6338: removed from the external scaler in v2.17, which ignores it since
    "tlsCertFile": "KEDA 2.17 removed it and ignores it: give the CA as 'caCert' in a TriggerAuthentication",
}


@dataclass(frozen=True)
class ScalerQuery:
    """What one trigger asks: a metric in a namespace for a selector, and its two thresholds."""

    metric: str
    namespace: str
    selector: Selector
    #: the per-replica target (`targetSizeFloat`), >= `MIN_TARGET`
    target: float
    #: `IsActive` is true iff the served value is above this
    activation_target: float


def _lookup(metadata: Mapping[str, str], key: str) -> tuple[str, str] | None:
    """`(key as sent, value)` of `key` or its `FromEnv` twin; both at once is refused."""
    env_key = key + FROM_ENV
    if key in metadata and env_key in metadata:
        raise InvalidMetadata(f"scalerMetadata keys {key!r} and {env_key!r} are both set: give one of them")
    for sent in (key, env_key):
        if sent in metadata:
            return sent, metadata[sent]
    return None


def _required(key: str, rule: str) -> InvalidMetadata:
    return InvalidMetadata(
        f"scalerMetadata key {key!r} (or {key + FROM_ENV!r}) is required: {rule}; KEDA drops a "
        f"{key + FROM_ENV!r} whose variable is unset or empty"
    )


def _number(metadata: Mapping[str, str], key: str, *, default: float | None, minimum: float) -> float:
    found = _lookup(metadata, key)
    rule = f"a number >= {minimum:g}" if minimum else "a number >= 0"
    if found is None:
        if default is None:
            raise _required(key, f"{rule}, e.g. '10' or '500m'")
        return default
    sent, text = found
    try:
        value = parse_quantity(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < minimum:
        why = " (KEDA keeps targets in milli-units: a smaller one reaches the HPA as 0)" if minimum else ""
        raise InvalidMetadata(
            f"scalerMetadata key {sent!r} value {echo(text)} must be {rule}, e.g. '10' or '500m'{why}"
        )
    return value


def parse(namespace: str, metadata: Mapping[str, str]) -> ScalerQuery:
    """Read a ScaledObjectRef's namespace and `scalerMetadata`; `InvalidMetadata` names the first bad key.

    Does not check that the metric is in the catalogue: the provider answers that (`MetricNotFound`).
    KEDA sends the same few triggers on every poll, so results are memoized (errors are not, and
    are raised again each time).
    """
    return _parse_cached(namespace, tuple(sorted(metadata.items())))


@functools.lru_cache(maxsize=1024)
def _parse_cached(namespace: str, items: tuple[tuple[str, str], ...]) -> ScalerQuery:
    metadata = dict(items)
    unknown = sorted(
        key for key in metadata if key.removesuffix(FROM_ENV) not in KEYS and key not in KEDA_KEYS
    )
    if unknown:
        key = unknown[0]
        hint = _HINTS.get(key, f"the keys are {list(KEYS)}")
        raise InvalidMetadata(f"unknown scalerMetadata key {echo(key)}: {hint}")
    try:
        check_namespace(namespace)
    except InvalidNamespace as error:
        raise InvalidMetadata(f"invalid namespace {error}") from None
    found_metric = _lookup(metadata, METRIC)
    metric = found_metric[1].strip() if found_metric else ""
    if not metric:
        raise _required(METRIC, "the name of a catalogue metric, e.g. 'vllm_requests_inflight'")
    found_selector = _lookup(metadata, LABEL_SELECTOR)
    try:
        selector = selectors.parse(found_selector[1] if found_selector else None)
    except InvalidSelector as error:
        sent = found_selector[0] if found_selector else LABEL_SELECTOR
        raise InvalidMetadata(
            f"scalerMetadata key {sent!r} is not a valid label selector: {error}"
        ) from error
    target = _number(metadata, TARGET, default=None, minimum=MIN_TARGET)
    activation = _number(metadata, ACTIVATION_TARGET, default=0.0, minimum=0.0)
    return ScalerQuery(metric, namespace, selector, target, activation)
