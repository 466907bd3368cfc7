"""Kubernetes label keys and values as apimachinery validates them, and the Prometheus label names
that carry them.

Prometheus label names allow only `[a-zA-Z_][a-zA-Z0-9_]*`, so a Kubernetes key such as
`app.kubernetes.io/name` is rendered as `app_kubernetes_io_name` (each of `.`, `/` and `-` becomes
`_`), which is what Prometheus' Kubernetes service discovery and kube-state-metrics do too.
"""

from __future__ import annotations

import re
from typing import Final

from adapter.errors import InvalidSelector

# Kubernetes' qualified-name rules (apimachinery/pkg/util/validation): a name part of up to 63
# characters, alphanumeric at both ends, with an optional DNS-subdomain prefix of up to 253.
_NAME_PART: Final = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE: Final = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_PROM_LABEL: Final = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_KEY_MAP: Final = str.maketrans({".": "_", "/": "_", "-": "_"})


def prometheus_label_name(key: str) -> str:
    """Map a Kubernetes label key to the Prometheus label name that carries it (see module doc)."""
    name = key.translate(_KEY_MAP)
    if not _PROM_LABEL.match(name):
        raise InvalidSelector(f"label key {key!r} cannot be mapped to a Prometheus label name ({name!r})")
    return name


def check_key(key: str) -> None:
    """`InvalidSelector` unless `key` is a qualified name Kubernetes accepts and Prometheus can carry."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise InvalidSelector(
            f"label key {key!r} must have a DNS subdomain prefix, e.g. 'app.kubernetes.io/name'"
        )
    if not _NAME_PART.match(name):
        raise InvalidSelector(
            f"label key {key!r} must be 63 characters or less, start and end with an alphanumeric "
            "character and contain only alphanumerics, '-', '_' or '.'"
        )
    prometheus_label_name(key)


def check_value(key: str, value: str) -> None:
    """`InvalidSelector` unless `value` is a label value Kubernetes accepts (`key` names it in the error)."""
    if not _LABEL_VALUE.match(value):
        raise InvalidSelector(
            f"value {value!r} of label {key!r} must be empty or 63 characters or less, start and end "
            "with an alphanumeric character and contain only alphanumerics, '-', '_' or '.'"
        )
