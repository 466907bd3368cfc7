"""The cluster's published authentication settings, and how the `--requestheader-*` flags combine with them.

The kube-apiserver publishes its client CA and front-proxy settings in the ConfigMap
`kube-system/extension-apiserver-authentication`; an aggregated API server reads them from there
unless flags say otherwise. A flag always wins; header names come from the ConfigMap only when
the requestheader CA does too (as in Kubernetes' `DelegatingAuthenticationOptions`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from adapter.config import SecuritySettings
from adapter.security.authn import (
    DEFAULT_EXTRA_HEADERS_PREFIXES,
    DEFAULT_GROUP_HEADERS,
    DEFAULT_USERNAME_HEADERS,
    RequestHeaderConfig,
)
from adapter.security.certauth import CertificateAuthority

CONFIGMAP_NAMESPACE: Final = "kube-system"
CONFIGMAP_NAME: Final = "extension-apiserver-authentication"


@dataclass(frozen=True)
class ClusterAuthentication:
    """What `kube-system/extension-apiserver-authentication` says; empty fields were not published."""

    client_ca_pem: bytes = b""
    requestheader_ca_pem: bytes = b""
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ()
    group_headers: tuple[str, ...] = ()
    extra_headers_prefixes: tuple[str, ...] = ()


def _json_list(data: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = data.get(key, "")
    if not raw.strip():
        return ()
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"configmap key {key!r} value {raw!r} must be a JSON list of strings")
    return tuple(value)


def parse_cluster_authentication(data: Mapping[str, str]) -> ClusterAuthentication:
    """Parse the ConfigMap's `data`; `ValueError` names the key that is malformed."""
    return ClusterAuthentication(
        client_ca_pem=data.get("client-ca-file", "").encode(),
        requestheader_ca_pem=data.get("requestheader-client-ca-file", "").encode(),
        allowed_names=_json_list(data, "requestheader-allowed-names"),
        username_headers=_json_list(data, "requestheader-username-headers"),
        group_headers=_json_list(data, "requestheader-group-headers"),
        extra_headers_prefixes=_json_list(data, "requestheader-extra-headers-prefix"),
    )


def requestheader_config(
    settings: SecuritySettings, ca_pem: bytes, cluster: ClusterAuthentication | None
) -> RequestHeaderConfig | None:
    """The front-proxy settings in force, or `None` without a requestheader CA.

    `ca_pem` is the requestheader CA in use (from the flag's file or the ConfigMap). Each header
    setting comes from its flag, else from the ConfigMap when the CA comes from it too, else the
    Kubernetes default. Raises `ValueError` for a CA bundle that does not parse.
    """
    if not ca_pem.strip():
        return None
    published = cluster if settings.requestheader_client_ca_file is None else None

    def pick(
        flag: tuple[str, ...] | None, value: tuple[str, ...], default: tuple[str, ...]
    ) -> tuple[str, ...]:
        if flag is not None:
            return flag
        return value if published is not None and value else default

    return RequestHeaderConfig(
        ca=CertificateAuthority.from_pem(ca_pem, "requestheader client CA"),
        allowed_names=pick(
            settings.requestheader_allowed_names, published.allowed_names if published else (), ()
        ),
        username_headers=pick(
            settings.requestheader_username_headers,
            published.username_headers if published else (),
            DEFAULT_USERNAME_HEADERS,
        ),
        group_headers=pick(
            settings.requestheader_group_headers,
            published.group_headers if published else (),
            DEFAULT_GROUP_HEADERS,
        ),
        extra_headers_prefixes=pick(
            settings.requestheader_extra_headers_prefix,
            published.extra_headers_prefixes if published else (),
            DEFAULT_EXTRA_HEADERS_PREFIXES,
        ),
    )
