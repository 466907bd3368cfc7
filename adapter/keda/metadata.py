"""A KEDA `ScaledObjectRef` read as a question to the provider: which metric, where, and against what.

The trigger's `metadata` reaches us as `scalerMetadata`, string to string, with exactly these keys:

| key                | meaning                                                                 | default  |
|--------------------|-------------------------------------------------------------------------|----------|
| `metric`           | a catalogue name (`vllm_requests_inflight`, `queue_depth`, ...)         | required |
| `labelSelector`    | Kubernetes selector text, same grammar and escaping as the HTTP API     | all      |
| `target`           | per-replica target value (a number or a quantity such as `500m`), > 0   | required |
| `activationTarget` | `IsActive` is true only while the value is above it, >= 0               | `0`      |

KEDA passes the whole trigger metadata, so its own connection keys (`scalerAddress`, ...) arrive too
and are ignored. Any other key is refused with a message naming it: a misspelt `labelselector` would
otherwise silently select every pod. The namespace is the ScaledObject's own, checked with the HTTP
API's rule for the namespace of its path (`adapter.names`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from adapter import selectors
from adapter.errors import BadRequest, InvalidSelector, Status
from adapter.names import InvalidNamespace, check_namespace, echo
from adapter.quantity import parse_quantity
from adapter.selectors import Selector

METRIC: Final = "metric"
LABEL_SELECTOR: Final = "labelSelector"
TARGET: Final = "target"
ACTIVATION_TARGET: Final = "activationTarget"
KEYS: Final = (METRIC, LABEL_SELECTOR, TARGET, ACTIVATION_TARGET)
#: trigger metadata that KEDA itself reads (connection and TLS settings) and forwards to every scaler
KEDA_KEYS: Final = frozenset({"scalerAddress", "enableTLS", "unsafeSsl", "caCert", "tlsCertFile", "tlsClientCert",
                              "tlsClientKey"})  # fmt: skip
#: keys people carry over from other KEDA scalers, with what they mean here
_HINTS: Final = {
    "activationThreshold": "use 'activationTarget' (KEDA's activationThreshold does not apply to external scalers)",
    "threshold": "use 'target'",
    "metricName": "use 'metric'",
    "query": "use 'metric' with a catalogue name; queries are configured in the adapter",
}


class InvalidMetadata(BadRequest):
    """A `scalerMetadata` key, its value, or the ScaledObject's namespace is not acceptable."""

    label = "bad_metadata"

    def status(self, metric: str = "") -> Status:
        # The message names only the caller's own input (truncated), so it is safe to return.
        body = super().status(metric)
        body["message"] = str(self)
        return body


@dataclass(frozen=True)
class ScalerQuery:
    """What one trigger asks: a metric in a namespace for a selector, and its two thresholds."""

    metric: str
    namespace: str
    selector: Selector
    #: the per-replica target (`targetSizeFloat`), > 0
    target: float
    #: `IsActive` is true iff the served value is above this
    activation_target: float


def _number(metadata: Mapping[str, str], key: str, *, default: float | None, positive: bool) -> float:
    text = metadata.get(key)
    rule = "a number > 0" if positive else "a number >= 0"
    if text is None:
        if default is None:
            raise InvalidMetadata(f"scalerMetadata key {key!r} is required: {rule}, e.g. '10' or '500m'")
        return default
    try:
        value = parse_quantity(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise InvalidMetadata(
            f"scalerMetadata key {key!r} value {echo(text)} must be {rule}, e.g. '10' or '500m'"
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
    unknown = sorted(key for key in metadata if key not in KEYS and key not in KEDA_KEYS)
    if unknown:
        key = unknown[0]
        hint = _HINTS.get(key, f"the keys are {list(KEYS)}")
        raise InvalidMetadata(f"unknown scalerMetadata key {echo(key)}: {hint}")
    try:
        check_namespace(namespace)
    except InvalidNamespace as error:
        raise InvalidMetadata(f"invalid namespace {error}") from None
    metric = metadata.get(METRIC, "").strip()
    if not metric:
        raise InvalidMetadata(
            f"scalerMetadata key {METRIC!r} is required: the name of a catalogue metric, e.g. 'vllm_requests_inflight'"
        )
    try:
        selector = selectors.parse(metadata.get(LABEL_SELECTOR))
    except InvalidSelector as error:
        raise InvalidMetadata(
            f"scalerMetadata key {LABEL_SELECTOR!r} is not a valid label selector: {error}"
        ) from error
    target = _number(metadata, TARGET, default=None, positive=True)
    activation = _number(metadata, ACTIVATION_TARGET, default=0.0, positive=False)
    return ScalerQuery(metric, namespace, selector, target, activation)
