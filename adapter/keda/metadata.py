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
otherwise silently select every pod. The namespace is the ScaledObject's own, checked as the HTTP API
checks the namespace of its path.
"""

from __future__ import annotations

import functools
import math
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from adapter import selectors
from adapter.errors import AdapterError, InvalidSelector, Status
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
# RFC 1123 DNS label: what the kube-apiserver accepts as a namespace name (apimachinery's IsDNS1123Label).
_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_LABEL_MAX: Final = 63
_DNS_LABEL_CHARS: Final = frozenset(string.ascii_lowercase + string.digits + "-")
# Echoed input is cut short: a caller must not be able to make our errors (and logs) arbitrarily long.
_ECHO_CHARS: Final = 64


class InvalidMetadata(AdapterError):
    """A `scalerMetadata` key, its value, or the ScaledObject's namespace is not acceptable."""

    code = 400
    reason = "BadRequest"
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


def echo(text: str) -> str:
    """`text` quoted for an error message: non-ASCII and control characters escaped, cut short."""
    if len(text) <= _ECHO_CHARS:
        return ascii(text)
    return f"{text[:_ECHO_CHARS]!a}... ({len(text)} characters)"


def check_namespace(namespace: str) -> str:
    """The namespace, or `InvalidMetadata` unless it is an RFC 1123 DNS label.

    The same rule and wording as the HTTP API's check of its path namespace (`adapter.api`), which a
    sibling front end does not import: a junk namespace can match nothing, so it must cost neither a
    cache key nor an upstream query.
    """
    if len(namespace) <= _DNS_LABEL_MAX and _DNS_LABEL.fullmatch(namespace):
        return namespace
    if len(namespace) > _DNS_LABEL_MAX:
        cause = f"must be at most {_DNS_LABEL_MAX} characters"
    elif bad := [c for c in namespace if c not in _DNS_LABEL_CHARS]:
        cause = f"must not contain {bad[0]!a}"
    else:
        cause = "must start and end with a lowercase letter or digit"
    raise InvalidMetadata(
        f"invalid namespace {echo(namespace)}: {cause} (an RFC 1123 label: lowercase letters, digits and '-', "
        "starting and ending with a letter or digit)"
    )


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
    check_namespace(namespace)
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
