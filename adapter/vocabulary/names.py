"""Kubernetes names as the kube-apiserver checks them, and a caller's rejected input echoed safely.

One rule for every front end that takes a namespace from outside: the HTTP API's path, KEDA's
`ScaledObjectRef`, and `vllm-autoscale query -n`. A junk namespace can match nothing, so each checks
it before the cache or a source sees it: it must cost neither a cache key (`cache.max_keys`) nor an
upstream query.
"""

from __future__ import annotations

import re
import string
from typing import Final

from adapter.errors import InvalidNamespace

#: a namespace name is an RFC 1123 DNS label, as apimachinery's `IsDNS1123Label` checks it
_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_LABEL_MAX: Final = 63
_DNS_LABEL_CHARS: Final = frozenset(string.ascii_lowercase + string.digits + "-")
#: characters of a caller's input echoed in an error and a log line: enough to recognise one's own
#: input, while a 6,000-character path segment is not copied into every answer and log line
_ECHO_MAX: Final = 64


def echo(text: str) -> str:
    """`text` quoted with non-ASCII and control characters escaped, cut at `_ECHO_MAX` characters."""
    if len(text) <= _ECHO_MAX:
        return ascii(text)
    return f"{text[:_ECHO_MAX]!a}... ({len(text)} characters)"


def check_namespace(namespace: str) -> str:
    """`namespace`, or `InvalidNamespace` unless it is an RFC 1123 DNS label (what Kubernetes accepts)."""
    if len(namespace) <= _DNS_LABEL_MAX and _DNS_LABEL.fullmatch(namespace):
        return namespace
    if len(namespace) > _DNS_LABEL_MAX:
        cause = f"must be at most {_DNS_LABEL_MAX} characters"
    elif bad := [c for c in namespace if c not in _DNS_LABEL_CHARS]:
        cause = f"must not contain {bad[0]!a}"
    else:
        cause = "must start and end with a lowercase letter or digit"
    raise InvalidNamespace(
        f"{echo(namespace)}: {cause} (an RFC 1123 label: lowercase letters, digits and '-', "
        "starting and ending with a letter or digit)"
    )
